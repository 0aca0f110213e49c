"""The conversation a tool call belongs to, as the host that runs the model holds it.

The agent loop (``sagents.agent``) passes its session state under the ``SessionContext.trusted``
key ``agent_session``; the tools that act on the conversation itself (``compress_history``, and
``web_fetch`` when it fetches only URLs seen in the conversation) find it with
:func:`conversation_of`. Hosts without a conversation (``sagents serve``: the MCP client keeps
it) pass none, and those tools say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Protocol, runtime_checkable

from sagents.tool._context import SessionContext

__all__ = ["CONVERSATION_KEY", "Conversation", "conversation_of", "urls_given", "urls_in"]

_GIVING_ROLES = frozenset({"user", "tool"})

CONVERSATION_KEY: Final = "agent_session"
"""The ``SessionContext.trusted`` key of the :class:`Conversation`."""

_URL = re.compile(r"https?://[^\s<>\"'`|\\^{}]+", re.IGNORECASE)
_TRAILING = ".,;:!?]}>*"  # punctuation that ends a sentence rather than a URL


@runtime_checkable
class Conversation(Protocol):
    """What a tool may see and ask of the conversation it runs in."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The history (OpenAI chat messages, without the system prompt)."""
        ...

    async def compress_history(self, *, focus: str | None = None) -> Mapping[str, Any]:
        """Summarise the older turns now; return what was done (counts, record, error)."""
        ...


def conversation_of(context: SessionContext) -> Conversation | None:
    """The conversation of ``context``, if its host passed one."""
    found = context.trusted.get(CONVERSATION_KEY)
    return found if isinstance(found, Conversation) else None


def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def urls_in(
    messages: Iterable[Mapping[str, Any]], roles: Iterable[str] = ("user", "tool")
) -> list[str]:
    """The http(s) URLs written in the messages of ``roles``, in order of appearance.

    Only message text counts (the content, or its text parts). See :func:`urls_given` for the
    URLs a user or a tool gave first.
    """
    wanted = set(roles)
    found: list[str] = []
    for message in messages:
        if message.get("role") in wanted:
            found.extend(_urls(_texts(message.get("content"))))
    return found


def urls_given(
    messages: Iterable[Mapping[str, Any]], *, same: Callable[[str], str | None] = lambda u: u
) -> set[str]:
    """The URLs (spelt as ``same`` spells them) whose first appearance in the conversation is
    in a user message or a tool result (a fetched page's links included).

    A URL the assistant wrote first, in its text or in a tool call's arguments, is never
    among them, even when a later tool result has it: a tool that echoes its input (a refusal
    quoting it, ``file_write`` then ``file_read``, a shell ``echo``) must not make a URL the
    model made up count as given (docs/builtin_tools.md, ``seenUrlsOnly``).

    Args:
        messages: The history, oldest first (OpenAI chat messages).
        same: The form two spellings of one URL share; None drops a URL.
    """
    first: dict[str, bool] = {}  # URL -> whether its first appearance was given
    for message in messages:
        given = message.get("role") in _GIVING_ROLES
        for url in _urls(_message_texts(message)):
            key = same(url)
            if key is not None:
                first.setdefault(key, given)
    return {url for url, given in first.items() if given}


def _message_texts(message: Mapping[str, Any]) -> Iterator[str]:
    r"""Every text of a message in which a URL may be written: its content, and for an
    assistant message each tool call's arguments, raw and JSON-decoded (``\/`` escapes)."""
    yield from _texts(message.get("content"))
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            yield arguments
            yield from _decoded_strings(arguments)
        elif arguments is not None:
            yield from _strings_in(arguments)


def _decoded_strings(arguments: str) -> Iterator[str]:
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser: raw text only
        return
    yield from _strings_in(value)


def _strings_in(value: Any) -> Iterator[str]:
    """The strings (keys and values) of a JSON value, walked without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _urls(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        for match in _URL.finditer(text):
            url = match.group()
            while url and (
                url[-1] in _TRAILING or (url[-1] == ")" and url.count("(") < url.count(")"))
            ):  # "(see https://x/y)." ends at "y"; ".../Foo_(bar)" keeps its ")"
                url = url[:-1]
            yield url

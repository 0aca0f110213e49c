"""The conversation a tool call belongs to, as the host that runs the model holds it.

The agent loop (``sagents.agent``) passes its session state under the ``SessionContext.trusted``
key ``agent_session``; the tools that act on the conversation itself (``compress_history``, and
``web_fetch`` when it fetches only URLs seen in the conversation) find it with
:func:`conversation_of`. Hosts without a conversation (``sagents serve``: the MCP client keeps
it) pass none, and those tools say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

from sagents.tool._context import SessionContext

__all__ = ["CONVERSATION_KEY", "Conversation", "conversation_of", "urls_in"]

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

    Only message text counts (the content, or its text parts): a URL the model wrote in its
    own text or tool-call arguments is not among them unless a user or tool message has it too.
    """
    wanted = set(roles)
    found: list[str] = []
    for message in messages:
        if message.get("role") not in wanted:
            continue
        for text in _texts(message.get("content")):
            for match in _URL.finditer(text):
                url = match.group()
                while url and (
                    url[-1] in _TRAILING or (url[-1] == ")" and url.count("(") < url.count(")"))
                ):  # "(see https://x/y)." ends at "y"; ".../Foo_(bar)" keeps its ")"
                    url = url[:-1]
                found.append(url)
    return found

"""Provider-neutral messages: what the agent loop's history is made of (docs/agent.md, "The
model seam").

A :class:`Message` has a role (``system``, ``user``, ``assistant`` or ``tool``) and parts:
:class:`TextPart`, :class:`ReasoningPart` (the model's reasoning, with the provider's opaque
signature or id kept as it came), :class:`ToolCall` (id, name, arguments as a JSON string) and
:class:`ToolResultPart`. :meth:`Message.to_openai` and :meth:`Message.from_openai` convert to and
from the OpenAI Chat Completions form; fields of that form no part models (a message's ``name``,
a multimodal ``content`` list) ride along in :attr:`Message.extra`, so the round trip keeps them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "Message",
    "Part",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCall",
    "ToolResultPart",
    "as_messages",
    "as_openai_messages",
    "is_new_call_id",
    "new_call_id",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES = ("system", "user", "assistant", "tool")
_MODELLED = frozenset({"role", "content", "tool_calls", "tool_call_id", "reasoning_content"})
REASONING_FIELD = "reasoning"
"""The ``id`` of a :class:`ReasoningPart` that a Chat Completions server sent in its
``reasoning`` field (Cerebras, Ollama, OpenRouter), not ``reasoning_content`` (DeepSeek, vLLM):
it goes back in that field (Cerebras refuses ``reasoning_content`` in a request)."""
_CALL_ID_CHARS: Final = 9
_NEW_CALL_ID = re.compile(f"[0-9a-f]{{{_CALL_ID_CHARS}}}")


def new_call_id() -> str:
    """An id for a tool call that came without one (or with one its answer already used):
    9 characters of ``[0-9a-f]``, within the strictest rule a known server applies (Mistral's
    API refuses any id but 9 characters of ``[a-zA-Z0-9]``), so that a history goes to any
    server. The loop and every adapter make ids with it, and only with it."""
    return uuid.uuid4().hex[:_CALL_ID_CHARS]


def is_new_call_id(call_id: str) -> bool:
    """Whether ``call_id`` has the form :func:`new_call_id` gives: sagents made it, no model
    did (an adapter whose API refuses ids it did not give, Gemini's, leaves such ids out)."""
    return _NEW_CALL_ID.fullmatch(call_id) is not None


@dataclass(frozen=True, kw_only=True)
class TextPart:
    """Text of a message.

    Attributes:
        text: The text.
        item_id: The provider's id of the output item it came in (OpenAI Responses'
            ``msg_...``), sent back with it where the provider pairs items by id.
    """

    text: str
    item_id: str | None = None
    type: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True)
class ReasoningPart:
    """The model's reasoning (``reasoning_content``, a thinking block).

    Attributes:
        text: The reasoning text (may be empty when the provider sends only a signature).
        signature: The provider's opaque signature of it (Anthropic's thinking blocks), kept
            exactly: some providers refuse the next request without it.
        id: The provider's id of it (OpenAI Responses' reasoning items).
        provider: Which provider made it (a part is sent back only to the provider it came
            from, when that provider wants it); None for a Chat Completions server's (what
            ``OpenAIChatModel`` read, or the ``reasoning_content`` of an OpenAI-form dict).
    """

    text: str
    signature: str | None = None
    id: str | None = None
    provider: str | None = None
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One tool call of an assistant message.

    Attributes:
        id: The call's id (the model's own, or one the loop gave it).
        name: The tool's name as the model called it.
        arguments: The arguments as a JSON string (``{}`` for none).
        item_id: The provider's id of the output item it came in when that is not the call's
            id (OpenAI Responses' ``fc_...``), sent back with it where the provider pairs
            items by id.
    """

    id: str
    name: str
    arguments: str = "{}"
    item_id: str | None = None
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, kw_only=True)
class ToolResultPart:
    """The result of one tool call (the one part of a ``tool`` message)."""

    tool_call_id: str
    content: str
    type: Literal["tool_result"] = "tool_result"


Part: TypeAlias = TextPart | ReasoningPart | ToolCall | ToolResultPart


@dataclass(frozen=True, kw_only=True)
class Message:
    """One message of a conversation.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        parts: Its parts, in order.
        extra: Fields of the OpenAI form no part models, kept for the round trip.
    """

    role: Role
    parts: tuple[Part, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"a message's role is one of {', '.join(_ROLES)}, not {self.role!r}")

    @property
    def text(self) -> str:
        """The text parts, joined."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def reasoning(self) -> str:
        """The reasoning parts' text, joined."""
        return "".join(p.text for p in self.parts if isinstance(p, ReasoningPart))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI Chat Completions form (lossy only for reasoning signatures and ids,
        which that format has no place for)."""
        # One pass over the parts: every event and every request converts messages, several
        # times a turn (bench/bench_agent_loop.py).
        texts: list[str] = []
        reasoning: list[str] = []
        reasoning_field = "reasoning_content"
        calls: list[dict[str, Any]] = []
        result: ToolResultPart | None = None
        for part in self.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ToolCall):
                calls.append(
                    {
                        "id": part.id,
                        "type": "function",
                        "function": {"name": part.name, "arguments": part.arguments},
                    }
                )
            elif isinstance(part, ReasoningPart):
                reasoning.append(part.text)
                if part.id == REASONING_FIELD:
                    reasoning_field = REASONING_FIELD
            else:
                result = part  # the last one's, as the format has one
        extra = self.extra
        content = extra.get("content")
        message: dict[str, Any] = {
            "role": self.role,
            "content": content if content is not None else "".join(texts),
        }
        if reasoning and (joined := "".join(reasoning)):
            message[reasoning_field] = joined
        if calls:
            message["tool_calls"] = calls
        if result is not None:
            message["tool_call_id"] = result.tool_call_id
            message["content"] = result.content
        for key, value in extra.items():
            if key != "content":
                message[key] = value
        return message

    @classmethod
    def from_openai(cls, message: Mapping[str, Any]) -> Message:
        """A message from its OpenAI Chat Completions form.

        Raises:
            ValueError: the form is not a chat message (the message says what is wrong).
        """
        role = message.get("role")
        if role not in _ROLES:
            raise ValueError(f"a chat message's role is one of {', '.join(_ROLES)}, not {role!r}")
        extra = {k: v for k, v in message.items() if k not in _MODELLED}
        parts: list[Part] = []
        content = message.get("content")
        if role == "tool":
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            parts.append(
                ToolResultPart(tool_call_id=str(message.get("tool_call_id") or ""), content=text)
            )
        else:
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                parts.append(ReasoningPart(text=reasoning))
            elif isinstance(other := extra.get(REASONING_FIELD), str) and other:
                del extra[REASONING_FIELD]
                parts.append(ReasoningPart(text=other, id=REASONING_FIELD))
            if isinstance(content, str):
                if content:
                    parts.append(TextPart(text=content))
            elif isinstance(content, list):  # a multimodal list: kept whole, its texts as parts
                extra["content"] = content
                parts.extend(
                    TextPart(text=str(item["text"]))
                    for item in content
                    if isinstance(item, Mapping) and isinstance(item.get("text"), str)
                )
            elif content is not None:
                raise ValueError(
                    f"content is a string, a list of content parts or null, not {content!r:.80}"
                )
            for call in _tool_calls(message.get("tool_calls")):
                function = call.get("function") or {}
                arguments = function.get("arguments")
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments or {}, ensure_ascii=False)
                parts.append(
                    ToolCall(
                        id=str(call.get("id") or ""),
                        name=str(function.get("name") or ""),
                        arguments=arguments or "{}",
                    )
                )
        return cls(role=role, parts=tuple(parts), extra=extra)


def _tool_calls(calls: Any) -> list[Mapping[str, Any]]:
    """An OpenAI message's ``tool_calls``, checked to be a list of calls whose ``function`` is
    an object (or absent)."""
    if not calls:
        return []
    if not isinstance(calls, list | tuple):
        raise ValueError(f"tool_calls is a list of calls, not {calls!r:.80}")
    for call in calls:
        if not isinstance(call, Mapping) or not isinstance(call.get("function") or {}, Mapping):
            raise ValueError(
                'tool_calls holds calls {"id", "type": "function", "function": {"name", '
                f'"arguments"}}, not {call!r:.80}'
            )
    return list(calls)


def as_messages(items: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    """:class:`Message` values from Messages or OpenAI-form dicts (mixed as they come).

    Raises:
        ValueError: an item is neither; the message names it (``messages[3]: ...``).
    """
    messages: list[Message] = []
    for number, item in enumerate(items):
        if isinstance(item, Message):
            messages.append(item)
            continue
        try:
            if not isinstance(item, Mapping):
                raise ValueError(f"a Message or a chat message dict, not {item!r:.80}")
            messages.append(Message.from_openai(item))
        except ValueError as error:
            raise ValueError(f"messages[{number}]: {error}") from None
    return messages


def as_openai_messages(items: Sequence[Message | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-form dicts from Messages or dicts (a dict is copied as it is)."""
    return [item.to_openai() if isinstance(item, Message) else dict(item) for item in items]

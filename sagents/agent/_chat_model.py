"""The model seam: :class:`ChatModel`, the protocol the agent loop, history compression, tool
selection and workflow selection call, over provider-neutral values (docs/agent.md, "The model
seam").

One :meth:`ChatModel.stream` call is one model call: it takes a :class:`ModelRequest` (system
prompt, :class:`~sagents.agent.Message` history, tools as ``ToolSpec``s, :class:`ModelSettings`)
and yields :data:`ModelEvent`s — text and reasoning deltas, tool-call start / arguments delta /
end, usage — ending with one :class:`Finish` that carries the complete :class:`ModelResponse`.
An adapter raises :class:`~sagents.errors.ModelError` subclasses for what went wrong; nothing
else. The adapters: ``OpenAIChatModel``, ``OpenAIResponsesModel``, ``AnthropicModel``,
``GeminiModel``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from sagents.agent._messages import Message, ToolCall
from sagents.core._spec import ToolSpec

__all__ = [
    "ChatModel",
    "Finish",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSchema",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "Usage",
    "close_stream",
    "complete",
    "usage_sink",
]


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """Per-call settings, the same for every adapter; None leaves each to the provider.

    Attributes:
        temperature: Sampling temperature.
        max_tokens: The most tokens of the answer.
        parallel_tool_calls: Whether one answer may make several tool calls.
        tool_choice: ``auto``, ``none``, ``required``, or the name of the one tool to call.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    parallel_tool_calls: bool | None = None
    tool_choice: str | None = None

    def __post_init__(self) -> None:
        """Refuse what no provider takes, naming the field (a ``ValueError``)."""
        temperature = self.temperature
        if temperature is not None and (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or not 0 <= temperature < math.inf
        ):
            raise ValueError(f"temperature is a number of 0 or more, not {temperature!r}")
        tokens = self.max_tokens
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
            raise ValueError(f"max_tokens is a whole number of 1 or more, not {tokens!r}")
        if tokens is not None and tokens < 1:
            raise ValueError(f"max_tokens is a whole number of 1 or more, not {tokens!r}")
        parallel = self.parallel_tool_calls
        if parallel is not None and not isinstance(parallel, bool):
            raise ValueError(f"parallel_tool_calls is True or False, not {parallel!r}")
        choice = self.tool_choice
        if choice is not None and (not isinstance(choice, str) or not choice):
            raise ValueError(
                f"tool_choice is auto, none, required or a tool's name, not {choice!r}"
            )


def model_settings_of(value: ModelSettings | Mapping[str, Any] | None) -> ModelSettings:
    """``SAgent(model_settings=...)`` as :class:`ModelSettings`: the value itself, or a
    mapping of its fields (pydantic-ai's ``ModelSettings`` is such a dict).

    Raises:
        TypeError: neither, or a key that is no field (naming it).
        ValueError: a value no provider takes (naming the field).
    """
    if value is None:
        return ModelSettings()
    if isinstance(value, ModelSettings):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(
            f"model_settings is a ModelSettings or a mapping of its fields, not {value!r:.80}"
        )
    fields = ("temperature", "max_tokens", "parallel_tool_calls", "tool_choice")
    unknown = sorted(str(key) for key in value if key not in fields)
    if unknown:
        raise TypeError(
            f"unknown model_settings key {unknown[0]!r}; the keys are {', '.join(fields)}"
        )
    return ModelSettings(**value)


def override_settings(base: ModelSettings, override: ModelSettings) -> ModelSettings:
    """``base`` with each field ``override`` sets (not None) replaced: a run's model settings
    over its agent's."""
    changed = {
        name: getattr(override, name)
        for name in ("temperature", "max_tokens", "parallel_tool_calls", "tool_choice")
        if getattr(override, name) is not None
    }
    return replace(base, **changed) if changed else base


@dataclass(frozen=True, kw_only=True)
class OutputSchema:
    """The shape the final answer must have (``SAgent(output_type=...)``): each adapter asks
    for it its provider's native way (docs/agent.md, "Structured output"); the answer comes
    back as its JSON text, and the loop validates it.

    Attributes:
        name: A name for the schema (``^[a-zA-Z0-9_-]{1,64}$``, as the APIs want).
        schema: The JSON Schema of the answer (an object), as pydantic writes it.
        description: What the answer is (the type's docstring), "" for none.
    """

    name: str
    schema: Mapping[str, Any]
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """What one model call sends.

    Attributes:
        system_prompt: The instructions ("" for none).
        messages: The history, oldest first.
        tools: The tools offered, each by the name the model calls it and the JSON Schema of
            its arguments as exported (docs/tool-schema.md).
        settings: See :class:`ModelSettings`.
        output: The shape a final answer (one without tool calls) must have, None for free
            text (:class:`OutputSchema`).
    """

    system_prompt: str = ""
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    output: OutputSchema | None = None


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens of one model call, as the provider reported them."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class TextDelta:
    """A piece of the assistant's text, as it streams."""

    text: str


@dataclass(frozen=True, kw_only=True)
class ReasoningDelta:
    """A piece of the model's reasoning (``reasoning_content``, thinking), as it streams."""

    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCallStart:
    """A tool call begins (``index`` counts the answer's calls from 0)."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, kw_only=True)
class ToolCallArgumentsDelta:
    """A piece of a tool call's arguments (JSON text)."""

    index: int
    arguments: str


@dataclass(frozen=True, kw_only=True)
class ToolCallEnd:
    """A tool call is complete."""

    index: int
    call: ToolCall


FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "other"]


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    """The complete answer of one model call.

    Attributes:
        message: The assistant message.
        finish_reason: Why the answer ended: ``stop``, ``tool_calls``, ``length`` (the output
            limit cut it), ``content_filter``, or ``other``.
        usage: The tokens, when reported.
    """

    message: Message
    finish_reason: FinishReason = "stop"
    usage: Usage | None = None


@dataclass(frozen=True, kw_only=True)
class Finish:
    """The last event of a model call."""

    response: ModelResponse

    @property
    def reason(self) -> FinishReason:
        """The response's finish reason."""
        return self.response.finish_reason


ModelEvent: TypeAlias = (
    TextDelta
    | ReasoningDelta
    | ToolCallStart
    | ToolCallArgumentsDelta
    | ToolCallEnd
    | Usage
    | Finish
)
"""Anything :meth:`ChatModel.stream` yields."""


@runtime_checkable
class ChatModel(Protocol):
    """A model the agent loop can call (docs/agent.md, "The model seam").

    Attributes:
        model: The model's name, for logs and errors.
    """

    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """One model call: its events, the last one a :class:`Finish`.

        Raises:
            ModelError: the call failed (a subclass says how).
        """
        ...

    async def aclose(self) -> None:
        """Release the client's connections."""
        ...


_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def finish_reason(raw: str | None) -> FinishReason:
    """A provider's finish reason in the neutral vocabulary (``other`` for one it lacks)."""
    return _FINISH_REASONS.get(raw or "", "other")


UsageSink = Callable[[str, Usage], Awaitable[None]]
"""Told the purpose and the usage of each model call :func:`complete` makes."""

usage_sink: ContextVar[UsageSink | None] = ContextVar("sagents_usage_sink", default=None)
"""Where :func:`complete` reports usage: the agent loop sets it for its run, so the calls of
compression, tool selection and workflow selection are ``usage`` events too."""


async def complete(
    model: ChatModel, request: ModelRequest, *, purpose: str = "turn"
) -> ModelResponse:
    """One model call, waited for whole: its :class:`ModelResponse`; its usage goes to the
    current :data:`usage_sink` with ``purpose``.

    Raises:
        ModelError: the call failed, or the adapter ended without a :class:`Finish`.
    """
    from sagents.errors import ModelError

    response: ModelResponse | None = None
    events = model.stream(request)
    try:
        async for event in events:
            if isinstance(event, Finish):
                response = event.response
    finally:
        await close_stream(events)
    if response is None:
        raise ModelError(f"the model {model.model!r} ended its answer without a finish")
    sink = usage_sink.get()
    if sink is not None and response.usage is not None:
        await sink(purpose, response.usage)
    return response


async def close_stream(events: AsyncIterator[ModelEvent]) -> None:
    """Close a model call's event stream (an async generator's ``aclose``), when it has one."""
    closing = getattr(events, "aclose", None)
    if closing is not None:
        await closing()

"""``AnthropicModel``: the model seam (:class:`~sagents.agent.ChatModel`) on Anthropic's Messages
API, through the official ``anthropic`` SDK (the extra ``sagents[anthropic]``).

What it sends (Anthropic API reference, "Messages", https://docs.anthropic.com/en/api/messages;
"Tool use", https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use):

* the system prompt as the top-level ``system``; a ``system`` message inside the history as a
  user text block (the Messages API has no system role there);
* the tools as :func:`sagents.tool.export_anthropic.to_anthropic_tool` exports them;
* an assistant message as content blocks, thinking first: its :class:`ReasoningPart`\\ s that
  came from Anthropic (``provider="anthropic"``, with their signature) as ``thinking`` blocks
  exactly as received (``redacted_thinking`` ones as such), then its text, then a ``tool_use``
  block per call ("Extended thinking", section "Preserving thinking blocks",
  https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking). Reasoning without a
  signature (another provider's) is not sent: the API refuses a thinking block without one;
* tool results as ``tool_result`` blocks of a user message; consecutive results (and a user
  message that follows them) merged into one user message, the results first.

What it reads (the streamed events of "Streaming Messages",
https://docs.anthropic.com/en/docs/build-with-claude/streaming): text deltas, ``thinking`` and
``signature`` deltas, a ``tool_use`` block's arguments as ``input_json_delta`` pieces, the usage
of ``message_start`` and ``message_delta``, and ``stop_reason``: ``end_turn`` and
``stop_sequence`` are ``stop``, ``tool_use`` is ``tool_calls``, ``max_tokens`` and
``model_context_window_exceeded`` are ``length`` (the agent loop runs no call of such an
answer), ``refusal`` is ``content_filter``, anything else ``other``. A stream that ends without
``message_stop``, or without a ``message_delta``'s stop reason before it, was cut and is never
taken as an answer.

Errors, as :class:`~sagents.agent.OpenAIChatModel` maps them: 408, 409, 429, 5xx and 529
``overloaded_error`` (also as a streamed ``error`` event before anything was passed on) are
retried, waiting what ``retry-after`` says; ``invalid_request_error`` and the other 4xx are not.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2 as httpx

from sagents.agent._chat_model import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from sagents.agent._endpoint import configured_api_key, configured_base_url
from sagents.agent._exported import Exported
from sagents.agent._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResultPart,
)
from sagents.agent._output import anthropic_output_config, prompted_output
from sagents.agent._retry import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_WAIT_S,
    DEFAULT_MODEL_DEADLINE_S,
    DEFAULT_MODEL_TIMEOUT_S,
    CallBudget,
    CallLimits,
    broken_answer,
    not_an_answer,
    says_context_length,
)
from sagents.errors import (
    ContextLengthError,
    ModelAuthError,
    ModelConfigError,
    ModelError,
    ModelNotFoundError,
    ModelStreamError,
    ModelUnavailableError,
)
from sagents.tool.export_anthropic import to_anthropic_tool

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["DEFAULT_ANTHROPIC_MAX_TOKENS", "PROVIDER", "AnthropicModel"]

PROVIDER = "anthropic"
"""The ``provider`` of the :class:`ReasoningPart`\\ s this adapter makes (and sends back)."""

DEFAULT_ANTHROPIC_MAX_TOKENS = 8192
"""``max_tokens`` of a request when :class:`ModelSettings` leaves it unset (the API needs one)."""

_REDACTED = "redacted_thinking"  # the id of a ReasoningPart holding a redacted_thinking block
_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")  # the API's pattern of a tool_use id
_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_RETRYABLE_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error"})
_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_AS_JSON = ("temperature",)


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as error:
        raise ModelConfigError(
            "the Anthropic adapter needs the anthropic SDK, which is not installed",
            hint="install the extra: pip install 'sagents[anthropic]'",
            details={"extra": "anthropic"},
        ) from error
    return anthropic


class AnthropicModel:
    """A Claude model behind Anthropic's Messages API.

    Args:
        model: The model name (``claude-...``; an ``anthropic:`` prefix is dropped).
        base_url: The API's root (without ``/v1``); ``ANTHROPIC_BASE_URL`` when None, else
            Anthropic's own.
        api_key: The key; ``ANTHROPIC_API_KEY`` when None.
        stream: Stream the answer (default); False asks for it whole, with the same events.
        timeout: Seconds to wait for the connection and for each next event of the answer
            (``ping`` events do not count: the SDK skips them, as SSE comments).
        deadline: Seconds one call may take in all, retries included; None: no limit.
        max_retries: Retries of a retryable failure (see the module docstring).
        max_retry_wait: The longest wait before a retry the call accepts.
        max_tokens: ``max_tokens`` when :class:`ModelSettings` leaves it unset.
        thinking: The request's ``thinking`` (``{"type": "enabled", "budget_tokens": N}``).
        extra_body: Extra JSON fields of every request.
        client: An ``AsyncAnthropic`` to use instead of building one.

    Raises:
        ModelConfigError: no model name or no key, or the ``anthropic`` SDK is missing (the
            message names the extra ``sagents[anthropic]``).
        ValueError: a timeout, deadline or wait that is not a positive number.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        timeout: float = DEFAULT_MODEL_TIMEOUT_S,
        deadline: float | None = DEFAULT_MODEL_DEADLINE_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT_S,
        max_tokens: int = DEFAULT_ANTHROPIC_MAX_TOKENS,
        thinking: Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        client: AsyncAnthropic | None = None,
    ) -> None:
        self.limits = CallLimits(
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
        )
        anthropic = _sdk()
        name = model or ""
        self.model = name.removeprefix(f"{PROVIDER}:")
        if not self.model:
            raise ModelConfigError(
                "no Anthropic model name is configured",
                hint="pass model='anthropic:claude-...' (SAGENTS_MODEL, `--model`)",
            )
        self.streaming = stream
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self._exported = Exported(lambda spec, name: to_anthropic_tool(spec, name=name))
        self.extra_body = dict(extra_body or {})
        if client is None:
            api_key = configured_api_key(api_key, "ANTHROPIC_API_KEY")
            if api_key is None:
                raise ModelConfigError(
                    "no Anthropic API key is configured",
                    hint="set ANTHROPIC_API_KEY (or pass api_key=...), and ANTHROPIC_BASE_URL "
                    "for an endpoint other than Anthropic's own",
                )
            client = anthropic.AsyncAnthropic(
                base_url=configured_base_url(base_url, "ANTHROPIC_BASE_URL"),
                api_key=api_key,
                # an httpx Timeout, not a float, which the SDK turns into one on every
                # request through a runtime Protocol check (bench/bench_agent_loop.py --calls)
                timeout=httpx.Timeout(timeout),
                max_retries=0,
            )
        self.client = client
        self.base_url = str(client.base_url)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.close()

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request for ``request`` (without ``stream``)."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.settings.max_tokens or self.max_tokens,
            "messages": _messages(request.messages),
        }
        system = request.system_prompt
        if request.output is not None:  # "Structured outputs": output_config.format
            config = anthropic_output_config(request.output)
            if config is None:  # beyond the strict subset: asked for in the prompt
                system = "\n\n".join(p for p in (system, prompted_output(request.output)) if p)
            else:
                body["output_config"] = config
        if system:
            body["system"] = system
        if request.tools:
            # each a copy of the export the adapter keeps
            body["tools"] = [dict(self._exported(spec, spec.name)) for spec in request.tools]
        body.update(_settings_fields(request.settings, has_tools=bool(request.tools)))
        if self.thinking is not None and _thinking_allowed(body["messages"]):
            body["thinking"] = dict(self.thinking)
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """One model call on the model seam: the answer as neutral events, ending with one
        :class:`~sagents.agent.Finish`.

        Raises:
            ModelAuthError: HTTP 401/403.
            ModelNotFoundError: HTTP 404.
            ContextLengthError: the prompt is too long for the model.
            ModelUnavailableError: retryable failures outlasted the retries, or the server asked
                for a longer wait than ``max_retry_wait``.
            ModelTimeoutError: nothing came for ``timeout`` seconds, or ``deadline`` passed.
            ModelStreamError: the streamed answer broke off or ended without ``message_stop`` or
                a stop reason.
            ModelError: any other error answer (``invalid_request_error``: never retried).
        """
        anthropic = _sdk()
        body = self.request_body(request)
        # Fields some SDK versions take no argument for (``temperature`` in 2.x) go as JSON.
        extra = {key: body.pop(key) for key in _AS_JSON if key in body}
        extra.update(self.extra_body)
        if extra:
            body["extra_body"] = extra
        budget = CallBudget.of(self)
        while True:
            answer = _Answer()
            try:
                if self.streaming:
                    events = await budget.bounded(self.client.messages.create(**body, stream=True))
                    async with events:
                        iterator = events.__aiter__()
                        while True:
                            try:
                                event = await budget.next(iterator)
                            except StopAsyncIteration:
                                break
                            out = answer.take(event)
                            if out is not None:
                                yield out
                    # complete only with message_delta's stop_reason and message_stop: a
                    # gateway may close an errored upstream's stream with a bare message_stop
                    if not answer.stopped or answer.stop_reason is None:
                        missing = "message_stop" if not answer.stopped else "a stop_reason"
                        cut = ModelStreamError(
                            f"the streamed answer from {self.base_url!r} ended without "
                            f"{missing}: it was cut off, so it is not taken as an answer",
                            hint="retry the turn; if it keeps happening, check any proxy between",
                        )
                        if answer.passed_on or not budget.can_retry:
                            raise cut
                        await budget.retry(cut)
                        continue
                else:
                    whole = await budget.bounded(self.client.messages.create(**body))
                    if (  # handed back as it came: a page, other JSON, no stop_reason
                        not isinstance(getattr(whole, "content", None), list)
                        or getattr(whole, "stop_reason", None) is None
                    ):
                        raise not_an_answer(
                            self.base_url,
                            whole,
                            "a finished Messages API message",
                            hint="check that ANTHROPIC_BASE_URL points at the API's root "
                            "(without /v1), not at a web page or a proxy's login",
                        )
                    for out in answer.take_whole(whole):
                        yield out
            except anthropic.APIStatusError as error:
                if answer.passed_on or not self._retryable(error) or not budget.can_retry:
                    raise self._status_error(error, budget.attempt) from error
                await budget.retry(error, error.response.headers)
                continue
            except (anthropic.APIConnectionError, anthropic.APIError, ValueError) as error:
                if answer.passed_on or not budget.can_retry:
                    raise broken_answer(
                        self.base_url,
                        error,
                        hint="check ANTHROPIC_BASE_URL and that the server runs; retry the turn",
                        attempts=budget.attempt + 1,
                        unreachable=not answer.passed_on
                        and isinstance(error, anthropic.APIConnectionError),
                    ) from error
                await budget.retry(error)
                continue
            response = answer.response()
            if response.usage is not None:
                yield response.usage
            yield Finish(response=response)
            return

    def _retryable(self, error: Any) -> bool:
        kind = _error_type(error)
        if kind == "invalid_request_error":
            return False
        return error.status_code in _RETRYABLE_STATUS or kind in _RETRYABLE_TYPES

    def _status_error(self, error: Any, retries: int) -> ModelError:
        status = int(error.status_code)
        kind = _error_type(error)
        text = _error_message(error)
        details: dict[str, Any] = {"status": status, "type": kind}
        if status in (401, 403):
            return ModelAuthError(
                f"the Anthropic endpoint {self.base_url!r} refused the API key "
                f"(HTTP {status}): {text}",
                hint="set ANTHROPIC_API_KEY (or pass api_key=...) to a key this endpoint accepts",
                details=details,
            )
        if status == 404:
            return ModelNotFoundError(
                f"model {self.model!r} or the endpoint {self.base_url!r} was not found "
                f"(HTTP 404): {text}",
                hint="check the model name, and that ANTHROPIC_BASE_URL is the API's root "
                "(without /v1)",
                details=details,
            )
        if says_context_length(text):
            return ContextLengthError(
                f"the conversation is too long for model {self.model!r}: {text}",
                hint="start a new conversation, or shorten the history",
                details=details,
            )
        if self._retryable(error):
            return ModelUnavailableError(
                f"the Anthropic endpoint {self.base_url!r} kept failing (HTTP {status}, "
                f"{kind}) after {retries} retries: {text}",
                hint="try again later",
                details=details,
            )
        return ModelError(
            f"the Anthropic endpoint {self.base_url!r} rejected the request "
            f"(HTTP {status}, {kind}): {text}",
            hint="sending it again would fail the same way: the API does not accept this request",
            details=details,
        )


def _error_body(error: Any) -> dict[str, Any]:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return inner
    return {}


def _error_type(error: Any) -> str:
    return str(_error_body(error).get("type") or "")


def _error_message(error: Any) -> str:
    return str(_error_body(error).get("message") or error.message)


@dataclass(kw_only=True)
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    call_id: str = ""
    name: str = ""
    call_index: int = -1
    start_input: str = ""
    """A tool_use's input as its ``content_block_start`` gave it, when not empty: some
    Anthropic-compatible servers send it whole there and no ``input_json_delta``."""
    stopped: bool = False


@dataclass(kw_only=True)
class _Answer:
    """Builds the assistant message out of the stream's events."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    parts: list[Part] = field(default_factory=list)
    calls: int = 0
    stop_reason: str | None = None
    input_tokens: int = 0
    cached: int | None = None
    output_tokens: int = 0
    reported: bool = False
    stopped: bool = False
    passed_on: bool = False

    def take(self, event: Any) -> ModelEvent | None:
        """The event to pass on for a streamed ``event``, if any (each gives at most one)."""
        # Deltas first, a text delta with no call of its own, one event or None rather than a
        # list, each attribute of the SDK's event read once (pydantic models: slow reads): this
        # runs once per streamed event, most of them text deltas (bench/bench_agent_loop.py,
        # streamed turns).
        kind = event.type
        if kind == "content_block_delta":
            index, delta = event.index, event.delta
            block = self.blocks.get(index)
            if block is None:
                raise ValueError(f"a content_block_delta for block {index}, which never started")
            if delta.type == "text_delta":
                text = delta.text
                block.text.append(text)
                self.passed_on = True
                return TextDelta(text=text)
            out = self._delta(block, delta)
        elif kind == "content_block_start":
            out = self._start(event.index, event.content_block)
        elif kind == "content_block_stop":
            out = self._stop(event.index)
        else:
            if kind == "message_start":
                self._usage(event.message.usage)
            elif kind == "message_delta":
                self.stop_reason = event.delta.stop_reason or self.stop_reason
                self._usage(event.usage)
            elif kind == "message_stop":
                self.stopped = True
            return None
        if out is not None:
            self.passed_on = True
        return out

    def take_whole(self, message: Any) -> list[ModelEvent]:
        """The events to pass on for a whole ``message``."""
        out: list[ModelEvent] = []
        self._usage(message.usage)
        for index, block in enumerate(message.content):
            started = self._start(index, block)
            if started is not None:
                out.append(started)
            if block.type == "tool_use":
                self.blocks[index].text.append(json.dumps(block.input, ensure_ascii=False))
            stopped = self._stop(index)
            if stopped is not None:
                out.append(stopped)
        self.stop_reason = message.stop_reason
        self.stopped = True
        self.passed_on = bool(out)
        return out

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        self.reported = True
        fresh = getattr(usage, "input_tokens", None)
        read = getattr(usage, "cache_read_input_tokens", None)
        written = getattr(usage, "cache_creation_input_tokens", None)
        if isinstance(fresh, int):
            # The neutral prompt tokens count every token of the prompt, cached or not.
            self.input_tokens = fresh + (read or 0) + (written or 0)
        if isinstance(read, int):
            self.cached = read
        if isinstance(usage.output_tokens, int):
            self.output_tokens = usage.output_tokens  # cumulative in message_delta

    def _start(self, index: int, content: Any) -> ModelEvent | None:
        block = _Block(kind=content.type)
        self.blocks[index] = block
        if block.kind == "text" and content.text:
            block.text.append(content.text)
            return TextDelta(text=content.text)
        if block.kind == "thinking":
            block.signature = content.signature or None
            if content.thinking:
                block.text.append(content.thinking)
                return ReasoningDelta(text=content.thinking)
        if block.kind == _REDACTED:
            block.signature = content.data
        if block.kind == "tool_use":
            block.call_id, block.name = content.id, content.name
            start_input = getattr(content, "input", None)
            if start_input:  # Anthropic's own is {}: the input comes as input_json_delta
                block.start_input = json.dumps(start_input, ensure_ascii=False)
            block.call_index = self.calls
            self.calls += 1
            return ToolCallStart(index=block.call_index, id=block.call_id, name=block.name)
        return None

    def _delta(self, block: _Block, delta: Any) -> ModelEvent | None:
        """A delta other than text's (see :meth:`take`)."""
        kind = delta.type
        if kind == "thinking_delta":
            text = delta.thinking
            block.text.append(text)
            return ReasoningDelta(text=text)
        if kind == "signature_delta":
            block.signature = (block.signature or "") + delta.signature
        elif kind == "input_json_delta":
            arguments = delta.partial_json
            if arguments:
                block.text.append(arguments)
                return ToolCallArgumentsDelta(index=block.call_index, arguments=arguments)
        return None

    def _stop(self, index: int) -> ModelEvent | None:
        block = self.blocks.get(index)
        if block is None:
            return None
        block.stopped = True
        text = "".join(block.text)
        if block.kind == "text" and text:
            self.parts.append(TextPart(text=text))
        elif block.kind == "thinking":
            self.parts.append(
                ReasoningPart(text=text, signature=block.signature, provider=PROVIDER)
            )
        elif block.kind == _REDACTED:
            self.parts.append(
                ReasoningPart(text="", signature=block.signature, id=_REDACTED, provider=PROVIDER)
            )
        elif block.kind == "tool_use":
            # the deltas are the input when any came; else what the block's start gave
            arguments = text or block.start_input or "{}"
            call = ToolCall(id=block.call_id, name=block.name, arguments=arguments)
            self.parts.append(call)
            return ToolCallEnd(index=block.call_index, call=call)
        return None

    def response(self) -> ModelResponse:
        # A tool_use block the output limit cut has no content_block_stop: keep it as a call,
        # so the loop answers it (as truncated) instead of losing it.
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "tool_use" and not block.stopped:
                self._stop(index)
        usage = None
        if self.reported:
            usage = Usage(
                prompt_tokens=self.input_tokens,
                completion_tokens=self.output_tokens,
                cached_tokens=self.cached,
            )
        return ModelResponse(
            message=Message(role="assistant", parts=tuple(self.parts)),
            finish_reason=_STOP_REASONS.get(self.stop_reason or "", "other"),
            usage=usage,
        )


def _assistant_blocks(message: Message, ids: Mapping[str, str]) -> list[dict[str, Any]]:
    """The blocks of an assistant message, each call's ``tool_use`` id as ``ids`` maps it."""
    thinking: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if part.provider != PROVIDER or part.signature is None:
                continue  # the API refuses a thinking block without its signature
            if part.id == _REDACTED:
                thinking.append({"type": _REDACTED, "data": part.signature})
            else:
                thinking.append(
                    {"type": "thinking", "thinking": part.text, "signature": part.signature}
                )
        elif isinstance(part, TextPart) and part.text:
            rest.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            rest.append(
                {
                    "type": "tool_use",
                    "id": ids[part.id],
                    "name": part.name,
                    "input": _input(part),
                }
            )
    return thinking + rest


def _thinking_allowed(messages: list[dict[str, Any]]) -> bool:
    """Whether a request may enable thinking: in the middle of a tool loop (the last message
    holds tool results) the API wants the assistant turn before it to start with a thinking
    block, and refuses the request otherwise, advising to disable thinking ("Extended
    thinking", "Preserving thinking blocks"). Such a turn was made elsewhere (another
    provider, OpenAI-form history): that request goes without thinking."""
    last = messages[-1] if messages else None
    if last is None or last["role"] != "user" or len(messages) < 2:
        return True
    if not any(block["type"] == "tool_result" for block in last["content"]):
        return True
    return messages[-2]["content"][0]["type"] in ("thinking", _REDACTED)


def _tool_use_id(call_id: str) -> str:
    """A call's id in the API's pattern ``^[a-zA-Z0-9_-]+$``: as it is when it fits (every id
    Anthropic made), else the same id for the call and its result, distinct from any other
    (another server's ``functions.get_weather:0``, Kimi's form, is refused as it is)."""
    if _TOOL_USE_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{re.sub(r'[^a-zA-Z0-9_-]', '_', call_id)[:40]}_{digest}"


def _unused(sent: str, used: set[str]) -> str:
    """``sent``, or, when an earlier call of the conversation went with it (a server that names
    every call ``call_0``: the API refuses "`tool_use` ids must be unique"), the same id with a
    number, within the pattern; marked used."""
    candidate, number = sent, 1
    while candidate in used:
        number += 1
        candidate = f"{sent}_{number}"
    used.add(candidate)
    return candidate


def _input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use`` needs: ``{}`` for arguments that are no
    JSON object (a call the output limit cut: its result says so)."""
    try:
        value = json.loads(call.arguments or "{}", strict=False)  # as the call was read
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _messages(history: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The Messages API ``messages``: consecutive user-side blocks merged into one user
    message, tool results first."""
    out: list[dict[str, Any]] = []
    used: set[str] = set()  # the tool_use ids sent so far: the API refuses one used twice
    ids: dict[str, str] = {}  # the last assistant message's call ids, as sent
    for message in history:
        if message.role == "assistant":
            ids = {}
            for call in message.tool_calls:
                ids[call.id] = _unused(_tool_use_id(call.id), used)
            blocks = _assistant_blocks(message, ids)
            # the API refuses an empty assistant message, and one whose last block is
            # thinking (an answer cut inside its thinking): such a message says nothing
            if blocks and blocks[-1]["type"] not in ("thinking", _REDACTED):
                out.append({"role": "assistant", "content": blocks})
            continue
        results = [
            {
                "type": "tool_result",
                "tool_use_id": ids.get(p.tool_call_id) or _tool_use_id(p.tool_call_id),
                "content": p.content,
            }
            for p in message.parts
            if isinstance(p, ToolResultPart)
        ]
        texts = [
            {"type": "text", "text": p.text}
            for p in message.parts
            if isinstance(p, TextPart) and p.text
        ]
        blocks = results + texts
        if not blocks:
            continue
        if out and out[-1]["role"] == "user":
            previous = out[-1]["content"]
            merged = [b for b in previous if b["type"] == "tool_result"] + results
            merged += [b for b in previous if b["type"] != "tool_result"] + texts
            out[-1]["content"] = merged
        else:
            out.append({"role": "user", "content": blocks})
    return out


def _settings_fields(settings: ModelSettings, *, has_tools: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if settings.temperature is not None:
        fields["temperature"] = settings.temperature
    if not has_tools:
        return fields
    choice: dict[str, Any] | None = None
    named = settings.tool_choice
    if named is not None:
        kinds = {"auto": "auto", "none": "none", "required": "any"}
        choice = {"type": kinds[named]} if named in kinds else {"type": "tool", "name": named}
    if settings.parallel_tool_calls is False:
        choice = choice or {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if choice is not None:
        fields["tool_choice"] = choice
    return fields

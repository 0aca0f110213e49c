"""``OpenAIResponsesModel``: the model seam (:class:`~sagents.agent.ChatModel`) on OpenAI's
Responses API, through the official ``openai`` SDK's ``responses`` client.

What it sends (OpenAI API reference, "Responses", https://platform.openai.com/docs/api-reference/responses;
"Function calling", https://platform.openai.com/docs/guides/function-calling; "Reasoning",
https://platform.openai.com/docs/guides/reasoning):

* the system prompt as ``instructions``; the history as ``input`` items: user and system
  messages as role messages, an assistant message as its items in order (its reasoning items,
  its text as a ``message`` item, each call as a ``function_call`` item), each tool result as a
  ``function_call_output``;
* the tools as :func:`sagents.tool.export_responses.to_responses_tool` exports them;
* reasoning items back exactly as received (``id``, summaries, ``encrypted_content``), together
  with the ids of the items that followed them: the API pairs a reasoning item with the item
  after it and refuses either one alone ("Item 'fc_...' of type 'function_call' was provided
  without its required 'reasoning' item", "Item 'rs_...' of type 'reasoning' was provided
  without its required following item"). A turn whose reasoning cannot be sent (it came from
  another provider, or ``store=False`` and no ``encrypted_content``) goes without reasoning
  and without item ids, which the API accepts.

What it reads (the streamed events of "Streaming API responses",
https://platform.openai.com/docs/guides/streaming-responses): ``response.output_text.delta``,
``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta``,
``response.output_item.added`` / ``response.function_call_arguments.delta`` /
``response.output_item.done`` for calls, and one of ``response.completed``,
``response.incomplete`` (``max_output_tokens`` → ``length``, ``content_filter``) or
``response.failed`` last. A stream that ends without one of these was cut and is never taken
as an answer. The Responses stream has no ``data: [DONE]``.

Errors are the OpenAI API's, as :class:`~sagents.agent.OpenAIChatModel` maps them; an ``error``
event or a ``response.failed`` whose code is a server error or a rate limit is retried when
nothing of the answer was passed on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
import openai
from openai import AsyncOpenAI

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
from sagents.agent._messages import Message, Part, ReasoningPart, TextPart, ToolCall, ToolResultPart
from sagents.agent._openai_errors import (
    NOT_AN_OPENAI_API,
    openai_error_in_stream,
    openai_retryable,
    openai_status_error,
)
from sagents.agent._output import openai_json_schema
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
    ModelConfigError,
    ModelError,
    ModelStreamError,
    ModelUnavailableError,
)
from sagents.tool.export_responses import to_responses_tool

__all__ = ["PROVIDER", "OpenAIResponsesModel"]

PROVIDER = "openai-responses"
"""The ``provider`` of the :class:`ReasoningPart`\\ s this adapter makes (and sends back)."""

_NO_KEY = "sagents-no-key"  # local servers need no key; the SDK needs a string
_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})
# a whole response's status, when it has ended (``queued`` and ``in_progress`` have not), and
# the stream event that ends one in that state
_WHOLE_ENDS = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}
# the answer's text; a refusal (Structured Outputs) is what the model answered
_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
# Codes of a failed response (or an `error` event) that another try may cure.
_RETRYABLE_CODES = frozenset(
    {"server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down", "overloaded"}
)


class OpenAIResponsesModel:
    """A model behind OpenAI's Responses API (``POST /v1/responses``).

    Args:
        model: The model name (an ``openai-responses:`` prefix is dropped); ``SAGENTS_MODEL``
            when None.
        base_url: The endpoint, usually ending in ``/v1``; ``OPENAI_BASE_URL`` when None, else
            OpenAI's own.
        api_key: The key; ``OPENAI_API_KEY`` when None (a local ``base_url`` may go without).
        stream: Stream the answer (default); False asks for it whole, with the same events.
        timeout: Seconds to wait for the connection and for each next event of the answer.
        deadline: Seconds one call may take in all, retries included; None: no limit.
        max_retries: Retries of a retryable failure.
        max_retry_wait: The longest wait before a retry the call accepts.
        reasoning: The request's ``reasoning`` (``{"effort": "low", "summary": "auto"}``);
            with it, ``include`` asks for the reasoning's ``encrypted_content``.
        store: The request's ``store``; None leaves it to the API (which stores). The history
            is sent whole either way.
        extra_body: Extra JSON fields of every request.
        client: An ``AsyncOpenAI`` to use instead of building one.

    Raises:
        ModelConfigError: no model name, or neither an endpoint nor a key.
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
        reasoning: Mapping[str, Any] | None = None,
        store: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.limits = CallLimits(
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
        )
        name = model or os.environ.get("SAGENTS_MODEL") or ""
        self.model = name.removeprefix(f"{PROVIDER}:")
        if not self.model:
            raise ModelConfigError(
                "no model name is configured",
                hint="pass model='openai-responses:MODEL' (SAGENTS_MODEL, `--model`)",
            )
        self.streaming = stream
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.store = store
        self.extra_body = dict(extra_body or {})
        self._exported = Exported(lambda spec, name: to_responses_tool(spec, name=name))
        if client is None:
            base_url = configured_base_url(base_url, "OPENAI_BASE_URL")
            api_key = configured_api_key(api_key, "OPENAI_API_KEY")
            if base_url is None and api_key is None:
                raise ModelConfigError(
                    "no model endpoint is configured",
                    hint="set OPENAI_API_KEY, and OPENAI_BASE_URL for an endpoint other than "
                    "OpenAI's own (or pass base_url=/api_key=)",
                )
            client = AsyncOpenAI(
                base_url=base_url,
                api_key=api_key or _NO_KEY,
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
        """The Responses API request for ``request`` (without ``stream``)."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": _input(request.messages, store=self.store),
        }
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            # each a copy of the export the adapter keeps
            body["tools"] = [dict(self._exported(spec, spec.name)) for spec in request.tools]
        body.update(_settings_fields(request.settings, has_tools=bool(request.tools)))
        if request.output is not None:  # "Structured Outputs": text.format
            body["text"] = {"format": {"type": "json_schema", **openai_json_schema(request.output)}}
        if self.reasoning is not None:
            body["reasoning"] = dict(self.reasoning)
            body["include"] = ["reasoning.encrypted_content"]
        if self.store is not None:
            body["store"] = self.store
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """One model call on the model seam: the answer as neutral events, ending with one
        :class:`~sagents.agent.Finish`.

        Raises:
            ModelAuthError: HTTP 401/403.
            ModelNotFoundError: HTTP 404.
            ContextLengthError: the input is too long for the model.
            ModelQuotaError: the account has no quota left (never retried).
            ModelUnavailableError: retryable failures outlasted the retries, or the server asked
                for a longer wait than ``max_retry_wait``.
            ModelTimeoutError: nothing came for ``timeout`` seconds, or ``deadline`` passed.
            ModelStreamError: the streamed answer broke off or ended without its last event.
            ModelError: any other error answer, or a failed response.
        """
        body = self.request_body(request)
        if self.extra_body:
            body["extra_body"] = dict(self.extra_body)
        budget = CallBudget.of(self)
        while True:
            answer = _Answer()
            try:
                if self.streaming:
                    events = await budget.bounded(self.client.responses.create(**body, stream=True))
                    async with events:
                        iterator = events.__aiter__()
                        while True:
                            try:
                                event = await budget.next(iterator)
                            except StopAsyncIteration:
                                break
                            for out in answer.take(event):
                                yield out
                else:
                    whole = await budget.bounded(self.client.responses.create(**body))
                    if (  # handed back as it came: a page, other JSON, no status of an end
                        not isinstance(getattr(whole, "output", None), list)
                        or getattr(whole, "status", None) not in _WHOLE_ENDS
                    ):
                        raise not_an_answer(
                            self.base_url,
                            whole,
                            "a finished Responses API response",
                            hint=NOT_AN_OPENAI_API,
                        )
                    for out in answer.take_whole(whole):
                        yield out
                failure = answer.failure(self.base_url)
                if failure is not None:
                    retryable, error = failure
                    if answer.passed_on or not retryable or not budget.can_retry:
                        raise error
                    await budget.retry(error)
                    continue
            except openai.APIStatusError as error:
                if answer.passed_on or not openai_retryable(error) or not budget.can_retry:
                    raise openai_status_error(
                        error, endpoint=self.base_url, model=self.model, retries=budget.attempt
                    ) from error
                await budget.retry(error, error.response.headers)
                continue
            except (openai.APIConnectionError, openai.APIError, ValueError) as error:
                if isinstance(error, openai.APIError):  # an error the server sent in the stream
                    refused = openai_error_in_stream(
                        error, endpoint=self.base_url, model=self.model
                    )
                    if refused is not None:
                        raise refused from error
                if answer.passed_on or not budget.can_retry:
                    raise broken_answer(
                        self.base_url,
                        error,
                        hint="check OPENAI_BASE_URL and that the server runs; retry the turn",
                        attempts=budget.attempt + 1,
                        unreachable=not answer.passed_on
                        and isinstance(error, openai.APIConnectionError),
                    ) from error
                await budget.retry(error)
                continue
            response = answer.response()
            if response.usage is not None:
                yield response.usage
            yield Finish(response=response)
            return


@dataclass(kw_only=True)
class _Call:
    index: int
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class _Answer:
    """Builds the assistant message out of the stream's events (or a whole response)."""

    items: dict[int, Any] = field(default_factory=dict)  # complete output items by index
    calls: dict[int, _Call] = field(default_factory=dict)  # calls by output index
    final: Any = None  # the response of the last event
    end: str | None = None  # the last event's type
    error: Any = None  # an `error` event's payload
    streamed: dict[str, list[str]] = field(default_factory=dict)  # text deltas by item id
    passed_on: bool = False

    def take(self, event: Any) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        kind = event.type
        if kind in _TEXT_DELTAS and event.delta:
            out.append(TextDelta(text=event.delta))
            self.streamed.setdefault(getattr(event, "item_id", None) or "", []).append(event.delta)
        elif kind in (
            "response.reasoning_summary_text.delta",
            "response.reasoning_text.delta",
        ):
            if event.delta:
                out.append(ReasoningDelta(text=event.delta))
        elif kind == "response.output_item.added" and event.item.type == "function_call":
            call = _Call(index=len(self.calls), call_id=event.item.call_id, name=event.item.name)
            self.calls[event.output_index] = call
            out.append(ToolCallStart(index=call.index, id=call.call_id, name=call.name))
        elif kind == "response.function_call_arguments.delta":
            started = self.calls.get(event.output_index)
            if started is not None and event.delta:
                started.arguments.append(event.delta)
                out.append(ToolCallArgumentsDelta(index=started.index, arguments=event.delta))
        elif kind == "response.output_item.done":
            self.items[event.output_index] = event.item
            out.extend(self._call_done(event.output_index, event.item))
        elif kind in _ENDS:
            self.end, self.final = kind, event.response
        elif kind == "error":
            self.error = event
        self.passed_on = self.passed_on or bool(out)
        return out

    def take_whole(self, response: Any) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for index, item in enumerate(response.output):
            if item.type == "reasoning":
                text = "".join(s.text for s in item.summary) or "".join(
                    c.text for c in item.content or ()
                )
                if text:
                    out.append(ReasoningDelta(text=text))
            elif item.type == "message":
                text = _message_text(item)
                if text:
                    out.append(TextDelta(text=text))
            elif item.type == "function_call":
                call = _Call(index=len(self.calls), call_id=item.call_id, name=item.name)
                self.calls[index] = call
                out.append(ToolCallStart(index=call.index, id=call.call_id, name=call.name))
                out.append(ToolCallArgumentsDelta(index=call.index, arguments=item.arguments))
                out.extend(self._call_done(index, item))
            self.items[index] = item
        self.end = _WHOLE_ENDS[response.status]
        self.final = response
        self.passed_on = bool(out)
        return out

    def _call_done(self, index: int, item: Any) -> list[ModelEvent]:
        if item.type != "function_call":
            return []
        started = self.calls.get(index)
        if started is None:  # a server that sent no output_item.added for it
            started = _Call(index=len(self.calls), call_id=item.call_id, name=item.name)
            self.calls[index] = started
        return [ToolCallEnd(index=started.index, call=_tool_call(item))]

    def failure(self, endpoint: str) -> tuple[bool, ModelError] | None:
        """What went wrong, when the answer is not one: (retryable, the error)."""
        if self.error is not None:
            return _failed(endpoint, self.error.code, self.error.message)
        if self.end is None:
            return True, ModelStreamError(
                f"the streamed answer from {endpoint!r} ended without response.completed: it "
                "was cut off, so it is not taken as an answer",
                hint="retry the turn; if it keeps happening, check any proxy between",
            )
        if self.end == "response.failed":
            error = getattr(self.final, "error", None)
            return _failed(
                endpoint,
                getattr(error, "code", None),
                getattr(error, "message", None) or "the response failed",
            )
        return None

    def response(self) -> ModelResponse:
        output = list(getattr(self.final, "output", None) or ())
        if not output:  # some servers leave the final response's output empty
            output = [self.items[i] for i in sorted(self.items)]
        parts: list[Part] = []
        streamed = {key: "".join(pieces) for key, pieces in self.streamed.items()}
        for item in output:
            if item.type == "message":
                # the longer of the item's text and the streamed one: some servers finish
                # the item without the text, or with only its last token (docs/agent.md)
                text = _message_text(item)
                text = max(text, streamed.pop(item.id, ""), key=len)
                parts.extend([TextPart(text=text, item_id=item.id)] if text else [])
            else:
                parts.extend(_parts_of(item))
        # text streamed for an item the answer does not hold at all
        parts.extend(TextPart(text=text) for text in streamed.values() if text)
        calls = any(isinstance(p, ToolCall) for p in parts)
        reason: FinishReason = "tool_calls" if calls else "stop"
        if self.end == "response.incomplete":
            details = getattr(self.final, "incomplete_details", None)
            cause = getattr(details, "reason", None)
            reason = "content_filter" if cause == "content_filter" else "length"
        return ModelResponse(
            message=Message(role="assistant", parts=tuple(parts)),
            finish_reason=reason,
            usage=_usage(getattr(self.final, "usage", None)),
        )


def _failed(endpoint: str, code: Any, message: Any) -> tuple[bool, ModelError]:
    code = str(code or "")
    text = f"{message} [{code}]" if code else str(message)
    details = {"code": code} if code else {}
    if says_context_length(text):  # the code (context_length_exceeded) or the words
        return False, ContextLengthError(
            f"the conversation is too long for the model: {text}",
            hint="start a new conversation, or shorten the history",
            details=details,
        )
    if code in _RETRYABLE_CODES:
        return True, ModelUnavailableError(
            f"the model endpoint {endpoint!r} failed the response: {text}",
            hint="try again later",
            details=details,
        )
    return False, ModelError(
        f"the model endpoint {endpoint!r} failed the response: {text}",
        hint="sending it again would fail the same way; check the request and the server",
        details=details,
    )


def _message_text(item: Any) -> str:
    """A message item's text: its ``output_text`` parts, and a ``refusal`` part's words."""
    return "".join(
        (getattr(c, "text", "") if c.type in ("output_text", "text") else "")
        or (getattr(c, "refusal", "") if c.type == "refusal" else "")
        or ""
        for c in item.content
    )


def _tool_call(item: Any) -> ToolCall:
    return ToolCall(
        id=item.call_id,
        name=item.name,
        arguments=item.arguments or "{}",
        item_id=getattr(item, "id", None),
    )


def _parts_of(item: Any) -> list[Part]:
    """The message parts of one output item (a reasoning item is one part per summary, all
    with its id, the last holding its ``encrypted_content``, so it goes back whole)."""
    if item.type == "message":
        text = _message_text(item)
        return [TextPart(text=text, item_id=item.id)] if text else []
    if item.type == "function_call":
        return [_tool_call(item)]
    if item.type != "reasoning":
        return []
    texts = [s.text for s in item.summary] or [c.text for c in item.content or ()] or [""]
    last = len(texts) - 1
    return [
        ReasoningPart(
            text=text,
            id=item.id,
            signature=item.encrypted_content if at == last else None,
            provider=PROVIDER,
        )
        for at, text in enumerate(texts)
    ]


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", None)
    reasoning = getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", None)
    return Usage(
        prompt_tokens=usage.input_tokens or 0,
        completion_tokens=usage.output_tokens or 0,
        cached_tokens=cached if isinstance(cached, int) else None,
        reasoning_tokens=reasoning if isinstance(reasoning, int) else None,
    )


def _sendable(part: ReasoningPart, store: bool | None) -> bool:
    """Whether a reasoning part can go back: this API's own, by id, and with its encrypted
    content when nothing is stored (the API cannot look an unstored id up)."""
    if part.provider != PROVIDER or not part.id:
        return False
    return store is not False or part.signature is not None


def _assistant_items(message: Message, store: bool | None) -> list[dict[str, Any]]:
    reasoning = [p for p in message.parts if isinstance(p, ReasoningPart)]
    paired = bool(reasoning) and all(_sendable(p, store) for p in reasoning)
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if not paired:
                continue
            last = items[-1] if items else None
            if last is not None and last["type"] == "reasoning" and last["id"] == part.id:
                if part.text:
                    last["summary"].append({"type": "summary_text", "text": part.text})
                if part.signature is not None:
                    last["encrypted_content"] = part.signature
                continue
            item: dict[str, Any] = {"type": "reasoning", "id": part.id, "summary": []}
            if part.text:
                item["summary"].append({"type": "summary_text", "text": part.text})
            if part.signature is not None:
                item["encrypted_content"] = part.signature
            items.append(item)
        elif isinstance(part, TextPart) and part.text:
            if paired and part.item_id:
                items.append(
                    {
                        "type": "message",
                        "id": part.item_id,
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": part.text, "annotations": []}],
                    }
                )
            else:
                items.append({"type": "message", "role": "assistant", "content": part.text})
        elif isinstance(part, ToolCall):
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": part.id,
                "name": part.name,
                "arguments": part.arguments or "{}",
            }
            if paired and part.item_id:
                call["id"] = part.item_id
            items.append(call)
    return items


def _content(message: Message) -> Any:
    """A user or system message's content: its text, or its multimodal list in this API's
    part types (``input_text``, ``input_image``)."""
    content = message.extra.get("content")
    if not isinstance(content, list):
        return message.text
    parts: list[dict[str, Any]] = []
    for piece in content:
        if not isinstance(piece, Mapping):
            continue
        if piece.get("type") == "text":
            parts.append({"type": "input_text", "text": str(piece.get("text") or "")})
        elif piece.get("type") == "image_url":
            image = piece.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            parts.append({"type": "input_image", "image_url": str(url), "detail": "auto"})
    return parts


def _input(history: tuple[Message, ...], *, store: bool | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in history:
        if message.role == "assistant":
            items.extend(_assistant_items(message, store))
        elif message.role == "tool":
            items.extend(
                {"type": "function_call_output", "call_id": p.tool_call_id, "output": p.content}
                for p in message.parts
                if isinstance(p, ToolResultPart)
            )
        else:
            items.append({"role": message.role, "content": _content(message)})
    return items


def _settings_fields(settings: ModelSettings, *, has_tools: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if settings.temperature is not None:
        fields["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        fields["max_output_tokens"] = settings.max_tokens
    if has_tools and settings.parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = settings.parallel_tool_calls
    choice = settings.tool_choice
    if has_tools and choice is not None:
        named = {"type": "function", "name": choice}
        fields["tool_choice"] = choice if choice in ("auto", "none", "required") else named
    return fields

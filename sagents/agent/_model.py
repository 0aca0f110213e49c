"""``OpenAIChatModel``: one model call against any OpenAI-compatible Chat Completions endpoint.

Built on the official ``openai`` SDK (``AsyncOpenAI``), so it talks to OpenAI, vLLM, Ollama, LM
Studio, LiteLLM, DeepSeek, Qwen and every other server of that wire format (OpenAI API
reference, "Chat Completions"). One :meth:`OpenAIChatModel.stream_turn` call is one model turn: it
yields :class:`TextDelta` pieces as the text arrives and ends with one :class:`ModelTurn` (the
complete assistant message, with its ``tool_calls``, and the usage). ``stream=False`` asks for
the whole answer at once (for servers that garble streamed tool-call deltas) and yields the same
sequence.

Retries: HTTP 408, 409, 429 and 5xx, and connection errors or a broken stream before any
answer arrived, are retried with exponential backoff (jittered, capped), waiting what
``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` says when the server says it; a
wait longer than ``max_retry_wait`` ends the call with a clear error instead of retrying early.
401/403, 404, context-length errors, an exhausted quota (429 ``insufficient_quota``) and a
request the server rejects as invalid (a 4xx, or a 5xx whose body is a validation error) are
not retried and raise errors that say what to check.

Time: ``timeout`` bounds each wait for the next piece of the answer (SSE keep-alive comments do
not count as a piece), ``deadline`` the whole call, retries included.

What real servers send is accepted as the docs/agent.md table "Servers' quirks" lists: tool-call
fragments that repeat the name or the id, change the id, carry cumulative arguments or a JSON
object, lack an ``index``; ``reasoning_content`` / ``reasoning`` deltas (kept in the message in
the field they came in, and sent back in it: DeepSeek requires ``reasoning_content`` back on
tool-call turns, Cerebras refuses it and sends ``reasoning``; reasoning another provider made is
not sent). A stream that ends without a ``finish_reason`` was cut and is never taken as an
answer. A history made on another provider goes as these servers take it: ``reasoning_content:
""`` on tool-call turns for a server that refuses them without it (DeepSeek's thinking mode),
tool-call ids in Mistral's 9-character rule for a server that refuses an id by its form, the
reasoning fields a server refuses left out.

It runs past 800 lines on purpose: one adapter holds both directions of one wire format (what
it sends, what it reads, its errors) and each server quirk above costs a few lines; split, one
answer would have to be followed across files.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import re
from collections.abc import AsyncGenerator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, overload

import httpx2 as httpx
import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from sagents.agent._call_ids import refuses_call_ids, within_nine_char_rule
from sagents.agent._chat_model import (
    ChatModel,
    Finish,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    finish_reason,
)
from sagents.agent._endpoint import configured_api_key, configured_base_url
from sagents.agent._messages import Message, ReasoningPart
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
    retry_delay,
)
from sagents.errors import (
    ModelConfigError,
    ModelError,
    ModelStreamError,
)

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_WAIT_S",
    "DEFAULT_MODEL_DEADLINE_S",
    "DEFAULT_MODEL_TIMEOUT_S",
    "ModelTurn",
    "OpenAIChatModel",
    "ReasoningDelta",
    "TextDelta",
    "Usage",
    "model_from_string",
    "openai_retryable",
    "openai_status_error",
    "retry_delay",
]

logger = logging.getLogger(__name__)

_NO_KEY = "sagents-no-key"  # local servers (vLLM, Ollama) need no key; the SDK needs a string
_REASONING_FIELDS = ("reasoning_content", "reasoning")  # DeepSeek, vLLM; OpenRouter, Ollama
# Finish reasons of an answer the server stopped before it was complete: vLLM and SGLang end a
# request their engine aborted with "abort" (and data: [DONE], as if it had finished),
# OpenRouter one whose provider failed with "error" (docs/agent.md, "Servers' quirks").
_ABORTED = frozenset({"abort", "error"})


@dataclass(frozen=True, kw_only=True)
class ModelTurn:
    """The end of one model call.

    Attributes:
        message: The assistant message in OpenAI format (``role``, ``content``, and
            ``tool_calls`` when there are any, each ``{"id", "type": "function", "function":
            {"name", "arguments"}}`` with ``arguments`` the string the model sent; and
            ``reasoning_content`` or ``reasoning``, the field the server used, when the model
            reasoned aloud).
        finish_reason: The endpoint's ``finish_reason`` (``stop``, ``tool_calls``, ``length``).
        usage: The tokens of the call, when the endpoint reported them.
    """

    message: dict[str, Any]
    finish_reason: str | None = None
    usage: Usage | None = None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The message's tool calls (empty when there are none)."""
        return list(self.message.get("tool_calls") or [])


TurnEvent = TextDelta | ReasoningDelta | ModelTurn


def _text_of(value: Any) -> str:
    """A fragment as text: a JSON object some servers send where a string belongs becomes its
    JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _chunked_content(content: Any) -> tuple[str, str]:
    """The text and the thinking of a ``content`` sent as a list of chunks: Mistral's
    magistral models send ``{"type": "thinking", "thinking": [{"type": "text", "text"}]}``
    chunks, then ``{"type": "text", "text"}`` ones. The thinking is passed on as reasoning but
    not kept for sending back: Mistral refuses an assistant message holding
    ``reasoning_content`` (docs/agent.md, "Servers' quirks")."""
    text: list[str] = []
    thinking: list[str] = []
    for chunk in content if isinstance(content, list) else ():
        if not isinstance(chunk, Mapping):
            continue
        if chunk.get("type") == "text":
            text.append(_text_of(chunk.get("text")))
        elif chunk.get("type") == "thinking":
            inner = chunk.get("thinking")
            for piece in inner if isinstance(inner, list) else [{"text": inner}]:
                if isinstance(piece, Mapping):
                    thinking.append(_text_of(piece.get("text")))
    return "".join(text), "".join(thinking)


def _is_whole_json(text: str) -> bool:
    try:
        json.loads(text, strict=False)  # as the tool layer reads arguments (raw newlines)
    except RecursionError:
        return True  # complete enough to parse this deep: the tool layer refuses it clearly
    except ValueError:
        return False
    return True


def _reasoning(model: Any) -> tuple[str, str]:
    """The reasoning text a delta or message carries and its field (``reasoning_content`` or
    ``reasoning``, fields the SDK's type does not declare: pydantic keeps them in
    ``model_extra``, read once per chunk, bench/bench_agent_loop.py), "" when none."""
    extra = getattr(model, "model_extra", None)
    if not extra or not isinstance(extra, dict):
        return "", ""
    for name in _REASONING_FIELDS:
        piece = extra.get(name)
        if isinstance(piece, str) and piece:
            return piece, name
    return "", ""


@dataclass(kw_only=True)
class _Accumulator:
    """Builds the assistant message out of streamed deltas, as each server sends them."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str = "reasoning_content"
    """The field the reasoning came in, and goes back in (docs/agent.md, "Servers' quirks")."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    chosen: bool = False
    """Whether any chunk carried a choice."""
    passed_on: bool = False
    """Whether a piece of the answer was passed on (the call is no longer retried)."""
    legacy: dict[str, str] = field(default_factory=lambda: {"name": "", "arguments": ""})
    _at: dict[int, dict[str, Any]] = field(default_factory=dict)  # the call of each index
    _last: int | None = None  # the index of the latest fragment

    def take(self, chunk: Any) -> list[TurnEvent]:
        """Add one streamed chunk; its text and reasoning pieces, to pass on."""
        events: list[TurnEvent] = []
        # `choices` null or absent: some servers' usage-only or malformed chunks (docs/agent.md,
        # "Servers' quirks"), which the SDK passes on as they came
        choices = chunk.choices or ()
        self.chosen = self.chosen or bool(choices)
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        for choice in choices:
            delta = choice.delta
            if delta is not None:
                piece, name = _reasoning(delta)
                if piece:
                    self.reasoning_field = name
                    self.reasoning.append(piece)
                    events.append(ReasoningDelta(text=piece))
                content = delta.content
                if content is not None and not isinstance(content, str):
                    content, thinking = _chunked_content(content)
                    if thinking:
                        events.append(ReasoningDelta(text=thinking))
                # a refusal (OpenAI Structured Outputs) is what the model answered: its text
                text = content or delta.refusal
                if text:
                    self.text.append(text)
                    events.append(TextDelta(text=text))
                for call_delta in delta.tool_calls or ():
                    self.add_tool_call_delta(call_delta)
                self.add_legacy_call(delta.function_call)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return events

    def add_tool_call_delta(self, delta: Any) -> None:
        """Add one tool-call fragment to its call.

        The call is the one of the fragment's ``index`` (the latest one when it has none). A
        fragment starts a new call when it brings a function name and either a new ``id`` at
        an index whose call is complete (some servers send every parallel call at index 0), or
        no call is open there. A repeated name or id (llama-cpp-python repeats both in every
        fragment) is not appended; a new id without a name (an id that changes across the
        fragments of one call) renames the call; arguments that repeat what came before plus
        more (cumulative, not deltas) replace it; arguments sent as a JSON object count as its
        JSON text.
        """
        function = delta.function
        name = _text_of(function.name) if function is not None else ""
        arguments = _text_of(function.arguments) if function is not None else ""
        index = getattr(delta, "index", None)
        index = index if isinstance(index, int) else None
        key = index if index is not None else self._last
        call = self._at.get(key) if key is not None else None
        if call is not None and name and delta.id and delta.id != call["id"]:
            complete = _is_whole_json(call["function"]["arguments"])
            if call["function"]["name"] != name or complete:
                call = None  # a new call at the same index
        if call is None and index is None and not name and self.calls:
            call = self.calls[-1]  # a fragment without index or name continues the last call
        if call is None:
            call = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            self.calls.append(call)
            if index is None:
                key = -len(self.calls)  # its own key: later fragments without index find it
        if key is None:
            key = -len(self.calls)
        self._at[key] = call
        self._last = key
        if delta.id and not call["id"]:
            call["id"] = delta.id  # the first id a call got stays its id
        if name and call["function"]["name"] != name:
            call["function"]["name"] += name
        if arguments:
            so_far = call["function"]["arguments"]
            if so_far and arguments.startswith(so_far):
                call["function"]["arguments"] = arguments  # cumulative
            else:
                call["function"]["arguments"] = so_far + arguments

    def add_legacy_call(self, function_call: Any) -> None:
        """The deprecated ``function_call`` some servers send beside ``tool_calls``."""
        if function_call is None:
            return
        name = _text_of(getattr(function_call, "name", None))
        if name:
            self.legacy["name"] = name
        self.legacy["arguments"] += _text_of(getattr(function_call, "arguments", None))

    def turn(self) -> ModelTurn:
        self._repair_from_legacy()
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message[self.reasoning_field] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = list(self.calls)
        return ModelTurn(message=message, finish_reason=self.finish_reason, usage=self.usage)

    def _repair_from_legacy(self) -> None:
        """llama-cpp-python's chatml-function-calling handler puts the first piece of the
        arguments only into the legacy ``function_call`` of its first fragment: when the one
        call's arguments are the legacy ones without their start, take the legacy ones."""
        if len(self.calls) != 1 or self.legacy["name"] != self.calls[0]["function"]["name"]:
            return
        function = self.calls[0]["function"]
        whole = self.legacy["arguments"]
        if len(whole) > len(function["arguments"]) and whole.endswith(function["arguments"]):
            function["arguments"] = whole


class _Cut(Exception):
    """A streamed answer broke off before anything of it was passed on (retryable)."""

    def __init__(self, error: ModelError) -> None:
        super().__init__(error.message)
        self.error = error


class OpenAIChatModel:
    """A Chat Completions model behind an OpenAI-compatible endpoint.

    Args:
        model: The model name; ``SAGENTS_MODEL`` when None.
        base_url: The endpoint, usually ending in ``/v1``; ``OPENAI_BASE_URL`` when None, else
            OpenAI's own.
        api_key: The key; ``OPENAI_API_KEY`` when None. May be left out for a local
            ``base_url`` that needs none.
        stream: Stream the answer (default); False asks for it whole, with the same events.
        timeout: Seconds to wait for the connection and for each next piece of the answer;
            SSE keep-alive comments do not count (see :data:`DEFAULT_MODEL_TIMEOUT_S`).
        deadline: Seconds one call may take in all, retries included (see
            :data:`DEFAULT_MODEL_DEADLINE_S`); None: no limit but ``timeout``.
        max_retries: Retries of a retryable failure (see the module docstring).
        max_retry_wait: The longest wait before a retry the call accepts; a server asking for
            more (``Retry-After``) ends the call with ``model_unavailable`` at once.
        extra_body: Extra JSON fields of every request (``temperature``, vendor options).
        client: An ``AsyncOpenAI`` to use instead of building one (its retries are left to it).

    Raises:
        ModelConfigError: no model name, or neither an endpoint nor a key: the message names
            the variables and options to set.
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
        extra_body: Mapping[str, Any] | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.limits = CallLimits(
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
        )
        self.model = _without_prefix(model or os.environ.get("SAGENTS_MODEL") or "")
        self.streaming = stream  # `stream` is the seam's method
        self.extra_body = dict(extra_body or {})
        # what ModelSettings.max_tokens is sent as: OpenAI's reasoning models refuse
        # `max_tokens` (a 400 naming `max_completion_tokens`), which most other servers ignore
        self._max_tokens_field = "max_tokens"
        # whether requests carry tool-call ids in Mistral's rule (9 characters [a-zA-Z0-9]):
        # from the server's first refusal of an id's form on (docs/agent.md, "Servers' quirks")
        self._nine_char_ids = False
        # whether each assistant message with tool calls carries `reasoning_content` ("" for a
        # turn no Chat server reasoned in): from DeepSeek's first refusal of one without it on
        self._reasoning_field_required = False
        # the reasoning fields the server refused in a request, left out from then on
        self._refused_fields: frozenset[str] = frozenset()
        if not self.model:
            raise ModelConfigError(
                "no model name is configured",
                hint="set SAGENTS_MODEL (or pass model=..., `--model M` on the command line)",
            )
        if client is None:
            base_url = configured_base_url(base_url, "OPENAI_BASE_URL")
            api_key = configured_api_key(api_key, "OPENAI_API_KEY")
            if base_url is None and api_key is None:
                raise ModelConfigError(
                    "no model endpoint is configured",
                    hint=(
                        "set OPENAI_BASE_URL (an OpenAI-compatible endpoint such as "
                        "http://localhost:8000/v1) and OPENAI_API_KEY if it needs one, or pass "
                        "base_url=/api_key= (`--base-url URL` on the command line)"
                    ),
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

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """One model call on the model seam (:class:`~sagents.agent.ChatModel`): the request
        in the Chat Completions form, the answer as neutral events ending with a
        :class:`~sagents.agent.Finish`. Tool-call events come once each call is complete.

        Raises:
            ModelError: as :meth:`stream_turn` says.
        """
        return self._call(partial(self._seam_request, request), seam=True)

    def stream_turn(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
        settings: ModelSettings | None = None,
        *,
        output: OutputSchema | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """One model call: :class:`TextDelta` (and :class:`ReasoningDelta`) pieces, then one
        :class:`ModelTurn`.

        Args:
            messages: The whole request history, system prompt first (OpenAI format).
            tools: OpenAI function tools; none are sent when empty.
            settings: The call's :class:`ModelSettings`.
            output: The final answer's shape, asked for as a ``json_schema`` response format
                (OpenAI "Structured Outputs").

        Raises:
            ModelAuthError: HTTP 401/403.
            ModelNotFoundError: HTTP 404.
            ContextLengthError: the request is too long for the model.
            ModelQuotaError: the account has no quota left (never retried).
            ModelUnavailableError: retryable failures outlasted the retries, or the server
                asked for a longer wait than ``max_retry_wait``.
            ModelTimeoutError: nothing came for ``timeout`` seconds, or ``deadline`` passed.
            ModelStreamError: the streamed answer broke off, or ended without a finish
                reason, after part of it was passed on.
            ModelError: any other error answer.
        """
        return self._call(partial(self._request, messages, tools, settings, output), seam=False)

    def _seam_request(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions request of a seam's :class:`ModelRequest`."""
        messages: list[dict[str, Any]] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        messages.extend(_chat_form(m) for m in request.messages)
        tools = [
            {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": dict(spec.input_schema),
                },
            }
            for spec in request.tools
        ]
        return self._request(messages, tools, request.settings, request.output)

    def _request(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        settings: ModelSettings | None,
        output: OutputSchema | None,
    ) -> dict[str, Any]:
        """The arguments of ``chat.completions.create`` (but ``stream``)."""
        sent = within_nine_char_rule(messages) if self._nine_char_ids else list(messages)
        if self._reasoning_field_required:
            sent = _with_reasoning_content(sent)
        if self._refused_fields:
            sent = _without_fields(sent, self._refused_fields)
        request: dict[str, Any] = {"model": self.model, "messages": sent}
        if tools:
            request["tools"] = list(tools)
        request.update(_settings_fields(settings, has_tools=bool(tools)))
        if "max_tokens" in request and self._max_tokens_field != "max_tokens":
            request[self._max_tokens_field] = request.pop("max_tokens")
        if output is not None:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": openai_json_schema(output),
            }
        if self.extra_body:
            request["extra_body"] = dict(self.extra_body)
        return request

    @overload
    def _call(
        self, build: Callable[[], dict[str, Any]], *, seam: Literal[True]
    ) -> AsyncGenerator[ModelEvent, None]: ...

    @overload
    def _call(
        self, build: Callable[[], dict[str, Any]], *, seam: Literal[False]
    ) -> AsyncGenerator[TurnEvent, None]: ...

    async def _call(
        self, build: Callable[[], dict[str, Any]], *, seam: bool
    ) -> AsyncGenerator[Any, None]:
        """The call :meth:`stream` and :meth:`stream_turn` make (the request ``build`` gives,
        built on the first ``anext``), with its retries: the answer's pieces, then the seam's
        tool-call, usage and finish events (``seam``), or one :class:`ModelTurn`.

        One generator from the SDK's chunks to the events, the chunks read in place (each
        generator layer was paid on every streamed piece: bench/bench_agent_loop.py).
        """
        request = build()
        budget = CallBudget.of(self)
        while True:
            try:
                if self.streaming:
                    stream = await budget.bounded(
                        self.client.chat.completions.create(
                            **request, stream=True, stream_options={"include_usage": True}
                        )
                    )
                    accumulator = _Accumulator()
                    try:
                        async with stream:
                            chunks = stream.__aiter__()
                            while True:
                                try:
                                    chunk = await budget.next(chunks)
                                except StopAsyncIteration:
                                    break
                                for event in accumulator.take(chunk):
                                    accumulator.passed_on = True
                                    yield event
                    except (httpx.HTTPError, openai.APIError, ValueError) as error:
                        # ValueError: a server-sent event whose data is not JSON
                        if isinstance(error, openai.APIStatusError):
                            raise
                        raise self._broken(error, accumulator) from error
                    turn = self._streamed_turn(accumulator)
                else:
                    completion = await budget.bounded(
                        self.client.chat.completions.create(**request)
                    )
                    if not isinstance(completion, ChatCompletion):
                        raise self._not_a_completion(completion)
                    if not completion.choices:
                        raise self._no_choices("a chat completion")
                    pieces, turn = _from_completion(completion)
                    if turn.finish_reason in _ABORTED:
                        raise _Cut(self._aborted(turn.finish_reason))
                    for piece in pieces:
                        yield piece
            except openai.APIStatusError as error:
                if "max_tokens" in request and _wants_max_completion_tokens(error):
                    self._max_tokens_field = "max_completion_tokens"  # sent again, renamed
                    request["max_completion_tokens"] = request.pop("max_tokens")
                    continue
                if not self._nine_char_ids and refuses_call_ids(f"{error.message} {error.body}"):
                    self._nine_char_ids = True  # sent again with the ids in the rule
                    request["messages"] = within_nine_char_rule(request["messages"])
                    continue
                if not self._reasoning_field_required and _wants_reasoning_content(error):
                    self._reasoning_field_required = True  # sent again with the field
                    request["messages"] = _with_reasoning_content(request["messages"])
                    continue
                refused = _refused_reasoning_field(error)
                if refused and refused not in self._refused_fields:
                    self._refused_fields |= {refused}  # sent again without it
                    request["messages"] = _without_fields(request["messages"], {refused})
                    continue
                if not openai_retryable(error) or not budget.can_retry:
                    raise openai_status_error(
                        error, endpoint=self.base_url, model=self.model, retries=budget.attempt
                    ) from error
                await budget.retry(error, error.response.headers)
                continue
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                if not budget.can_retry:
                    raise broken_answer(
                        self.base_url,
                        error,
                        hint="check OPENAI_BASE_URL (or --base-url) and that the server runs",
                        attempts=budget.attempt + 1,
                        unreachable=True,  # before the answer: the stream's own are _Cut
                    ) from error
                await budget.retry(error)
                continue
            except _Cut as cut:
                if not budget.can_retry:
                    raise cut.error from None
                await budget.retry(cut)
                continue
            if not seam:
                yield turn
                return
            for ending in _seam_ending(turn):
                yield ending
            return

    def _broken(self, error: BaseException, accumulator: _Accumulator) -> Exception:
        """The error of a stream that broke off: retryable (:class:`_Cut`) while nothing of
        the answer was passed on and the stream could be read. An error the server sent in
        the stream that sending the request again cannot cure (a refused request, a prompt
        past the context window, no credit left) is its own error, never retried."""
        if isinstance(error, openai.APIError):
            refused = openai_error_in_stream(error, endpoint=self.base_url, model=self.model)
            if refused is not None:
                return refused
        broken = ModelStreamError(
            f"the model's streamed answer from {self.base_url!r} broke off: {error!r}",
            hint="retry the turn; if it keeps happening, try stream=False (--no-stream)",
        )
        if accumulator.passed_on or isinstance(error, ValueError):
            return broken
        return _Cut(broken)

    def _streamed_turn(self, accumulator: _Accumulator) -> ModelTurn:
        """The turn a stream that ended built.

        Raises:
            ModelError: no chunk had a choice.
            ModelStreamError: the stream ended without a finish reason, after part of the
                answer was passed on.
            _Cut: the same, before anything was passed on (retryable).
        """
        if not accumulator.chosen:
            raise self._no_choices("a stream")
        if accumulator.finish_reason is None:
            cut = ModelStreamError(
                f"the model's streamed answer from {self.base_url!r} ended without a finish "
                "reason: it was cut off, so it is not taken as an answer",
                hint="retry the turn; if it keeps happening, check the server or any proxy "
                "between (a finished answer ends with a finish_reason and data: [DONE])",
            )
            if accumulator.passed_on:
                raise cut
            raise _Cut(cut)
        if accumulator.finish_reason in _ABORTED:
            aborted = self._aborted(accumulator.finish_reason)
            if accumulator.passed_on:
                raise aborted
            raise _Cut(aborted)
        return accumulator.turn()

    def _aborted(self, reason: str) -> ModelStreamError:
        """The error of an answer the server ended with ``finish_reason`` ``abort`` or
        ``error``: it stopped the answer before it was complete."""
        return ModelStreamError(
            f"the model's answer from {self.base_url!r} ended with finish_reason {reason!r}: "
            "the server stopped it before it was complete, so it is not taken as an answer",
            hint="retry the turn; if it keeps happening, check the server's logs (an engine "
            "shut down, scaled down or paused aborts the requests it was answering)",
            details={"finish_reason": reason},
        )

    def _not_a_completion(self, answer: object) -> ModelError:
        return not_an_answer(self.base_url, answer, "a chat completion", hint=NOT_AN_OPENAI_API)

    def _no_choices(self, what: str) -> ModelError:
        hint = (
            "retry the turn; if it keeps happening, check the server's logs and that "
            "SAGENTS_MODEL (--model) names a chat model it serves"
        )
        if self.streaming:  # llama-cpp-python answers a streamed tool choice with an empty body
            hint += (
                "; some servers cannot stream an answer with tool calls: ask for whole "
                "answers with stream=False (--no-stream)"
            )
        return ModelError(
            f"the model endpoint {self.base_url!r} answered {what} with no choices: "
            f"no text and no tool call came back for model {self.model!r}",
            hint=hint,
        )


def _chat_form(message: Message) -> dict[str, Any]:
    """A message as a Chat Completions request carries it: reasoning another provider made (a
    part that names its provider: an Anthropic thinking block, a Gemini thought, a Responses
    summary) is left out. It is text no Chat server produced and has no field of its own:
    Cerebras refuses ``reasoning_content`` in a request (as vLLM did before it read the
    field), and a server that reads it would take it for its own model's reasoning. A Chat
    server's own reasoning (no provider: what this adapter read, or a dict's
    ``reasoning_content``, as histories stored before parts named their provider hold it)
    goes back in the field it came in (docs/agent.md, "OpenAIChatModel")."""
    if message.role == "assistant" and any(map(_made_elsewhere, message.parts)):
        parts = tuple(p for p in message.parts if not _made_elsewhere(p))
        message = dataclasses.replace(message, parts=parts)
    return message.to_openai()


def _made_elsewhere(part: object) -> bool:
    return isinstance(part, ReasoningPart) and bool(part.provider)


def _seam_ending(turn: ModelTurn) -> list[ModelEvent]:
    """The seam's events after the answer's pieces: each tool call (whole), the usage, the
    :class:`Finish`."""
    message = Message.from_openai(turn.message)
    events: list[ModelEvent] = []
    for index, call in enumerate(message.tool_calls):
        events.append(ToolCallStart(index=index, id=call.id, name=call.name))
        events.append(ToolCallArgumentsDelta(index=index, arguments=call.arguments))
        events.append(ToolCallEnd(index=index, call=call))
    if turn.usage is not None:
        events.append(turn.usage)
    events.append(
        Finish(
            response=ModelResponse(
                message=message, finish_reason=finish_reason(turn.finish_reason), usage=turn.usage
            )
        )
    )
    return events


def _from_completion(completion: Any) -> tuple[list[TurnEvent], ModelTurn]:
    """A whole completion's pieces (reasoning, text) and its turn."""
    events: list[TurnEvent] = []
    choice = completion.choices[0] if completion.choices else None
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish_reason = None
    if choice is not None:
        finish_reason = choice.finish_reason
        content = choice.message.content
        if content is not None and not isinstance(content, str):
            content, thinking = _chunked_content(content)
            if thinking:
                events.append(ReasoningDelta(text=thinking))
        message["content"] = content or choice.message.refusal or None
        reasoning, name = _reasoning(choice.message)
        if reasoning:
            message[name] = reasoning
            events.append(ReasoningDelta(text=reasoning))
        if choice.message.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": _text_of(call.function.name),
                        "arguments": _text_of(call.function.arguments),
                    },
                }
                for call in choice.message.tool_calls
                if getattr(call, "function", None) is not None
            ]
    if message["content"]:
        events.append(TextDelta(text=message["content"]))
    usage = None
    if completion.usage is not None:
        usage = _usage(completion.usage)
    return events, ModelTurn(message=message, finish_reason=finish_reason, usage=usage)


def _wants_max_completion_tokens(error: openai.APIStatusError) -> bool:
    """Whether the server refused ``max_tokens`` asking for ``max_completion_tokens`` (OpenAI's
    reasoning models: HTTP 400 ``unsupported_parameter``, ``param: max_tokens``)."""
    body = error.body.get("error", error.body) if isinstance(error.body, dict) else None
    return (
        error.status_code == 400
        and isinstance(body, dict)
        and body.get("param") == "max_tokens"
        and "max_completion_tokens" in str(body.get("message") or "")
    )


def _wants_reasoning_content(error: openai.APIStatusError) -> bool:
    """Whether the server refused an assistant message with tool calls for lacking
    ``reasoning_content`` (DeepSeek's thinking mode: "Missing `reasoning_content` field in the
    assistant message at message index 2", "The `reasoning_content` in the thinking mode must
    be passed back to the API"; LiteLLM's "must include reasoning_content")."""
    text = f"{error.message} {error.body}"
    return (
        error.status_code == 400
        and "reasoning_content" in text
        and any(words in text for words in ("Missing", "must be passed back", "must include"))
    )


def _with_reasoning_content(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages with ``reasoning_content: ""`` on each assistant message with tool calls
    that has none: a turn this server's model did not reason in (another provider's, whose
    reasoning is not sent, or a model's that did not reason). DeepSeek takes it; its own
    turns keep the reasoning they came with."""
    return [
        {**m, "reasoning_content": ""}
        if m.get("role") == "assistant" and m.get("tool_calls") and "reasoning_content" not in m
        else dict(m)
        for m in messages
    ]


def _refused_reasoning_field(error: openai.APIStatusError) -> str | None:
    """The reasoning field (:data:`_REASONING_FIELDS`) the server refused in a request's
    messages, None when it refused none: Cerebras' "property '...reasoning_content' is
    unsupported", Mistral's HTTP 422 ``extra_forbidden`` "Extra inputs are not permitted" at
    ``messages.N.assistant.reasoning_content``, a gateway's "Extra inputs are not permitted,
    field: 'messages[8].reasoning'"."""
    text = f"{error.message} {error.body}"
    if (
        error.status_code not in (400, 422)
        or "messages" not in text  # a field of a message, not of the request
        or not any(words in text for words in ("unsupported", "not permitted", "extra_forbidden"))
    ):
        return None
    for name in _REASONING_FIELDS:  # `\b`: "reasoning" is not the start of "reasoning_content"
        if re.search(rf"\b{name}\b", text):
            return name
    return None


def _without_fields(
    messages: Sequence[Mapping[str, Any]], fields: Collection[str]
) -> list[dict[str, Any]]:
    """The messages without ``fields`` (a reasoning field the server refuses)."""
    return [{k: v for k, v in m.items() if k not in fields} for m in messages]


def _settings_fields(settings: ModelSettings | None, *, has_tools: bool) -> dict[str, Any]:
    """The Chat Completions fields of :class:`ModelSettings` (only those that are set)."""
    if settings is None:
        return {}
    fields: dict[str, Any] = {}
    if settings.temperature is not None:
        fields["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        fields["max_tokens"] = settings.max_tokens
    if has_tools and settings.parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = settings.parallel_tool_calls
    choice = settings.tool_choice
    if has_tools and choice is not None:
        named = {"type": "function", "function": {"name": choice}}
        fields["tool_choice"] = choice if choice in ("auto", "none", "required") else named
    return fields


def _without_prefix(model: str) -> str:
    provider, colon, name = model.partition(":")
    return name if colon and provider == "openai" else model


_PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini")


def _refuse_a_misspelt_provider(provider: str, name: str) -> None:
    """A ``provider:`` that is nearly one of :data:`_PROVIDERS` (``antropic``, ``Gemini``) is
    an error naming the one meant; anything further from them is a bare model name whose
    colon is its own (Ollama's ``llama3.1:8b``)."""
    meant = difflib.get_close_matches(provider.lower(), _PROVIDERS, n=1, cutoff=0.8)
    if meant:
        raise ModelConfigError(
            f"no model provider is named {provider!r}",
            hint=f"did you mean '{meant[0]}:{name}'? The providers are "
            + ", ".join(f"'{p}:'" for p in _PROVIDERS)
            + " (a bare name is a Chat Completions model)",
        )


def model_from_string(spec: str | None = None, **options: Any) -> ChatModel:
    """The model a ``"provider:model"`` string names (``SAGENTS_MODEL`` when None).

    ``openai:NAME``, or a bare ``NAME``, is Chat Completions (:class:`OpenAIChatModel`);
    ``openai-responses:NAME`` the Responses API (:class:`~sagents.agent.OpenAIResponsesModel`);
    ``anthropic:NAME`` the Messages API (:class:`~sagents.agent.AnthropicModel`, the extra
    ``sagents[anthropic]``); ``gemini:NAME`` the Gemini API
    (:class:`~sagents.agent.GeminiModel`, the extra ``sagents[gemini]``). ``options``
    (``base_url``, ``stream``, ...) go to the adapter.

    Raises:
        ModelConfigError: no model is named, or the adapter's SDK is not installed.
    """
    spec = spec or os.environ.get("SAGENTS_MODEL") or ""
    provider, colon, name = spec.partition(":")
    if colon and provider not in _PROVIDERS:
        _refuse_a_misspelt_provider(provider, name)
    # Each adapter is imported only when named, so a run loads only its own SDK.
    if colon and provider == "anthropic":
        from sagents.agent._anthropic import AnthropicModel

        return AnthropicModel(name, **options)
    if colon and provider == "openai-responses":
        from sagents.agent._responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name, **options)
    if colon and provider == "gemini":
        from sagents.agent._gemini import GeminiModel

        return GeminiModel(name, **options)
    return OpenAIChatModel(_without_prefix(spec) or None, **options)


def _usage(usage: Any) -> Usage:
    """The usage the endpoint reported, with the cached and reasoning tokens when it says them
    (``prompt_tokens_details.cached_tokens``, ``completion_tokens_details.reasoning_tokens``;
    DeepSeek's cache hits are ``prompt_cache_hit_tokens``)."""
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    cached = getattr(prompt_details, "cached_tokens", None)
    if cached is None:
        cached = getattr(usage, "prompt_cache_hit_tokens", None)
    reasoning = getattr(completion_details, "reasoning_tokens", None)
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=cached if isinstance(cached, int) else None,
        reasoning_tokens=reasoning if isinstance(reasoning, int) else None,
    )

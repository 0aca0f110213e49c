"""``OpenAIChatModel``: one model call against any OpenAI-compatible Chat Completions endpoint.

Built on the official ``openai`` SDK (``AsyncOpenAI``), so it talks to OpenAI, vLLM, Ollama, LM
Studio, LiteLLM, DeepSeek, Qwen and every other server of that wire format (OpenAI API
reference, "Chat Completions"). One :meth:`OpenAIChatModel.stream` call is one model turn: it
yields :class:`TextDelta` pieces as the text arrives and ends with one :class:`ModelTurn` (the
complete assistant message, with its ``tool_calls``, and the usage). ``stream=False`` asks for
the whole answer at once (for servers that garble streamed tool-call deltas) and yields the same
sequence.

Retries: HTTP 408, 409, 429 and 5xx, and connection errors before any answer arrived, are
retried with exponential backoff (jittered, capped), waiting what ``Retry-After`` says when the
server says it. 401/403, 404 and context-length errors are not retried and raise errors that
say what to check.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2 as httpx
import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from sagents.errors import (
    ContextLengthError,
    ModelAuthError,
    ModelConfigError,
    ModelError,
    ModelNotFoundError,
    ModelStreamError,
    ModelUnavailableError,
)

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MODEL_TIMEOUT_S",
    "ModelTurn",
    "OpenAIChatModel",
    "TextDelta",
    "Usage",
    "retry_delay",
]

DEFAULT_MODEL_TIMEOUT_S = 120.0
"""Seconds one model request may take (connect, and between streamed bytes)."""

DEFAULT_MAX_RETRIES = 4
"""Retries of a model request that failed with a retryable error."""

_RETRY_BASE_S = 0.5  # first backoff, doubled at each retry
_RETRY_MAX_S = 30.0  # no wait between retries is longer, Retry-After included
_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_CONTEXT_LENGTH_MARKERS = ("context_length_exceeded", "context length", "maximum context")
logger = logging.getLogger(__name__)

_SHOWN_ANSWER_CHARS = 300  # characters of a garbled answer shown in its error
_NO_KEY = "sagents-no-key"  # local servers (vLLM, Ollama) need no key; the SDK needs a string


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens of one model call, as the endpoint reported them."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, kw_only=True)
class TextDelta:
    """A piece of the assistant's text, as it streams."""

    text: str


@dataclass(frozen=True, kw_only=True)
class ModelTurn:
    """The end of one model call.

    Attributes:
        message: The assistant message in OpenAI format (``role``, ``content``, and
            ``tool_calls`` when there are any, each ``{"id", "type": "function", "function":
            {"name", "arguments"}}`` with ``arguments`` the raw string the model sent).
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


ModelEvent = TextDelta | ModelTurn


def retry_delay(attempt: int, headers: Mapping[str, str] | None) -> float:
    """Seconds to wait before retry ``attempt`` (1 for the first retry).

    ``Retry-After`` (seconds, or an HTTP date) wins when present; otherwise exponential backoff
    from 0.5 s with full jitter. Never more than 30 s.
    """
    if headers is not None:
        value = headers.get("retry-after-ms")
        if value is not None:
            try:
                return min(max(float(value) / 1000.0, 0.0), _RETRY_MAX_S)
            except ValueError:
                pass
        value = headers.get("retry-after")
        if value is not None:
            try:
                return min(max(float(value), 0.0), _RETRY_MAX_S)
            except ValueError:
                parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
                if parsed is not None:
                    return min(max(parsed.timestamp() - time.time(), 0.0), _RETRY_MAX_S)
    backoff = min(_RETRY_BASE_S * 2 ** (attempt - 1), _RETRY_MAX_S)
    return random.uniform(backoff / 2, backoff)


@dataclass(kw_only=True)
class _Accumulator:
    """Builds the assistant message out of streamed deltas."""

    text: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    _at: dict[int, dict[str, Any]] = field(default_factory=dict)  # the call of each index

    def add_tool_call_delta(self, delta: Any) -> None:
        """Add one tool-call delta to the call of its ``index``; a delta bringing a new ``id``
        at an index that already has a call starts a new call (some servers send every
        parallel call at index 0, each with its own id)."""
        index = int(delta.index or 0)
        call = self._at.get(index)
        if call is None or (delta.id and call["id"] and delta.id != call["id"]):
            call = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            self._at[index] = call
            self.calls.append(call)
        if delta.id:
            call["id"] = delta.id
        if delta.function is not None:
            if delta.function.name:
                call["function"]["name"] += delta.function.name
            if delta.function.arguments:
                call["function"]["arguments"] += delta.function.arguments

    def turn(self) -> ModelTurn:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = list(self.calls)
        return ModelTurn(message=message, finish_reason=self.finish_reason, usage=self.usage)


class OpenAIChatModel:
    """A Chat Completions model behind an OpenAI-compatible endpoint.

    Args:
        model: The model name; ``SAGENTS_MODEL`` when None.
        base_url: The endpoint, usually ending in ``/v1``; ``OPENAI_BASE_URL`` when None, else
            OpenAI's own.
        api_key: The key; ``OPENAI_API_KEY`` when None. May be left out for a local
            ``base_url`` that needs none.
        stream: Stream the answer (default); False asks for it whole, with the same events.
        timeout: Seconds one request may take (see :data:`DEFAULT_MODEL_TIMEOUT_S`).
        max_retries: Retries of a retryable failure (see the module docstring).
        extra_body: Extra JSON fields of every request (``temperature``, vendor options).
        client: An ``AsyncOpenAI`` to use instead of building one (its retries are left to it).

    Raises:
        ModelConfigError: no model name, or neither an endpoint nor a key: the message names
            the variables and options to set.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        timeout: float = DEFAULT_MODEL_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        extra_body: Mapping[str, Any] | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.model = model or os.environ.get("SAGENTS_MODEL") or ""
        self.stream = stream
        self.max_retries = max_retries
        self.extra_body = dict(extra_body or {})
        if not self.model:
            raise ModelConfigError(
                "no model name is configured",
                hint="set SAGENTS_MODEL (or pass model=..., `--model M` on the command line)",
            )
        if client is None:
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
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
                base_url=base_url, api_key=api_key or _NO_KEY, timeout=timeout, max_retries=0
            )
        self.client = client
        self.base_url = str(client.base_url)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.close()

    async def stream_turn(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
    ) -> AsyncGenerator[TextDelta | ModelTurn, None]:
        """One model call: :class:`TextDelta` pieces, then one :class:`ModelTurn`.

        Args:
            messages: The whole request history, system prompt first (OpenAI format).
            tools: OpenAI function tools; none are sent when empty.

        Raises:
            ModelAuthError: HTTP 401/403.
            ModelNotFoundError: HTTP 404.
            ContextLengthError: the request is too long for the model.
            ModelUnavailableError: retryable failures outlasted the retries.
            ModelStreamError: the streamed answer broke off.
            ModelError: any other error answer.
        """
        request: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            request["tools"] = list(tools)
        if self.extra_body:
            request["extra_body"] = dict(self.extra_body)
        attempt = 0
        while True:
            try:
                if self.stream:
                    stream = await self.client.chat.completions.create(
                        **request, stream=True, stream_options={"include_usage": True}
                    )
                    async for event in self._read_stream(stream):
                        yield event
                else:
                    completion = await self.client.chat.completions.create(**request)
                    if not isinstance(completion, ChatCompletion):
                        raise self._not_a_completion(completion)
                    if not completion.choices:
                        raise self._no_choices("a chat completion")
                    for event in _from_completion(completion):
                        yield event
                return
            except openai.APIStatusError as error:
                if error.status_code not in _RETRYABLE_STATUS or attempt >= self.max_retries:
                    raise self._status_error(error) from error
                attempt += 1
                await anyio.sleep(retry_delay(attempt, error.response.headers))
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                if attempt >= self.max_retries:
                    raise ModelUnavailableError(
                        f"the model endpoint {self.base_url!r} cannot be reached: {error}",
                        hint="check OPENAI_BASE_URL (or --base-url) and that the server runs",
                        details={"attempts": attempt + 1},
                    ) from error
                attempt += 1
                await anyio.sleep(retry_delay(attempt, None))

    async def _read_stream(self, stream: Any) -> AsyncIterator[TextDelta | ModelTurn]:
        accumulator = _Accumulator()
        chosen = False  # whether any chunk carried a choice
        try:
            async with stream:
                async for chunk in stream:
                    chosen = chosen or bool(chunk.choices)
                    if chunk.usage is not None:
                        accumulator.usage = Usage(
                            prompt_tokens=chunk.usage.prompt_tokens or 0,
                            completion_tokens=chunk.usage.completion_tokens or 0,
                        )
                    for choice in chunk.choices:
                        delta = choice.delta
                        if delta is not None and delta.content:
                            accumulator.text.append(delta.content)
                            yield TextDelta(text=delta.content)
                        if delta is not None and delta.tool_calls:
                            for call_delta in delta.tool_calls:
                                accumulator.add_tool_call_delta(call_delta)
                        if choice.finish_reason:
                            accumulator.finish_reason = choice.finish_reason
        except (httpx.HTTPError, openai.APIError, ValueError) as error:
            # ValueError: a server-sent event whose data is not JSON (json.JSONDecodeError)
            if isinstance(error, openai.APIStatusError):
                raise
            raise ModelStreamError(
                f"the model's streamed answer from {self.base_url!r} broke off: {error!r}",
                hint="retry the turn; if it keeps happening, try stream=False (--no-stream)",
            ) from error
        if not chosen:
            raise self._no_choices("a stream")
        if accumulator.finish_reason is None:  # a server quirk: the stream itself ended well
            logger.debug("the streamed answer from %r had no finish_reason", self.base_url)
        yield accumulator.turn()

    def _not_a_completion(self, answer: object) -> ModelError:
        shown = answer if isinstance(answer, str) else repr(answer)
        return ModelError(
            f"the model endpoint {self.base_url!r} answered something that is not a chat "
            f"completion: {shown[:_SHOWN_ANSWER_CHARS]!r}",
            hint=(
                "check that OPENAI_BASE_URL (--base-url) points at an OpenAI-compatible API, "
                "usually ending in /v1, and not at a web page or a proxy's login"
            ),
        )

    def _no_choices(self, what: str) -> ModelError:
        return ModelError(
            f"the model endpoint {self.base_url!r} answered {what} with no choices: "
            f"no text and no tool call came back for model {self.model!r}",
            hint=(
                "retry the turn; if it keeps happening, check the server's logs and that "
                "SAGENTS_MODEL (--model) names a chat model it serves"
            ),
        )

    def _status_error(self, error: openai.APIStatusError) -> ModelError:
        status = error.status_code
        text = _error_text(error)
        details: dict[str, Any] = {"status": status}
        if status in (401, 403):
            return ModelAuthError(
                f"the model endpoint {self.base_url!r} refused the API key (HTTP {status}): {text}",
                hint="set OPENAI_API_KEY (or pass api_key=...) to a key this endpoint accepts",
                details=details,
            )
        if status == 404:
            return ModelNotFoundError(
                f"model {self.model!r} or the endpoint {self.base_url!r} was not found "
                f"(HTTP 404): {text}",
                hint=(
                    "check SAGENTS_MODEL (--model) against the server's model list, and that "
                    "OPENAI_BASE_URL (--base-url) ends where the API starts (usually /v1)"
                ),
                details=details,
            )
        lowered = text.lower()
        if any(marker in lowered for marker in _CONTEXT_LENGTH_MARKERS):
            return ContextLengthError(
                f"the conversation is too long for model {self.model!r}: {text}",
                hint="start a new conversation, or shorten the history",
                details=details,
            )
        if status in _RETRYABLE_STATUS:
            return ModelUnavailableError(
                f"the model endpoint {self.base_url!r} kept failing (HTTP {status}) after "
                f"{self.max_retries} retries: {text}",
                hint="try again later",
                details=details,
            )
        return ModelError(
            f"the model endpoint {self.base_url!r} answered HTTP {status}: {text}",
            details=details,
        )


def _error_text(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            parts = [str(inner.get("message") or "")]
            if inner.get("code"):
                parts.append(f"[{inner['code']}]")
            return " ".join(p for p in parts if p) or json.dumps(body)
    return str(error.message)


def _from_completion(completion: Any) -> list[TextDelta | ModelTurn]:
    events: list[TextDelta | ModelTurn] = []
    choice = completion.choices[0] if completion.choices else None
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish_reason = None
    if choice is not None:
        finish_reason = choice.finish_reason
        message["content"] = choice.message.content or None
        if choice.message.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.function.name,
                        "arguments": call.function.arguments or "",
                    },
                }
                for call in choice.message.tool_calls
                if getattr(call, "function", None) is not None
            ]
    if message["content"]:
        events.append(TextDelta(text=message["content"]))
    usage = None
    if completion.usage is not None:
        usage = Usage(
            prompt_tokens=completion.usage.prompt_tokens or 0,
            completion_tokens=completion.usage.completion_tokens or 0,
        )
    events.append(ModelTurn(message=message, finish_reason=finish_reason, usage=usage))
    return events

"""``GeminiModel``: the model seam (:class:`~sagents.agent.ChatModel`) on the Gemini API, through
the official ``google-genai`` SDK (the extra ``sagents[gemini]``).

What it sends (Gemini API reference, "Generating content",
https://ai.google.dev/api/generate-content; "Function calling",
https://ai.google.dev/gemini-api/docs/function-calling; "Thought signatures",
https://ai.google.dev/gemini-api/docs/thought-signatures):

* the system prompt as ``system_instruction``; user (and history ``system``) messages as
  ``user`` contents; an assistant message as a ``model`` content whose parts are its thoughts,
  text and ``function_call``\\ s in order; the results of one answer's calls as
  ``function_response`` parts of one ``user`` content (``{"output": text}``, the name and, when
  the model gave one, the id of the call);
* the tools as :func:`sagents.tool.export_gemini.to_gemini_function_declaration` declares them
  (a name Gemini refuses declared under :func:`~sagents.tool.export_gemini.gemini_function_name`,
  renamed parameters put back: both mapped back on the calls); a tool that cannot be declared
  is left out with a warning;
* every ``thought_signature`` back on the part it came on, exactly: Gemini 3 refuses the next
  request of a tool-call turn without the signature of its function calls ("Function call is
  missing a thought_signature in functionCall parts"). A call whose signature did not survive
  (a history kept in the Chat Completions form, or written by another model) is sent with the
  placeholder the thought-signatures page documents for that case,
  ``skip_thought_signature_validator``.

What it reads: the ``GenerateContentResponse`` chunks of ``streamGenerateContent?alt=sse``:
text parts (``TextDelta``), ``thought`` parts (``ReasoningDelta``, kept as
:class:`ReasoningPart`\\ s with their signature), ``function_call`` parts (whole in one part:
start, arguments and end at once), ``usage_metadata`` and ``finish_reason``: ``STOP`` is
``stop`` (``tool_calls`` with calls), ``MAX_TOKENS`` ``length``, the safety reasons
``content_filter``, anything else ``other``. A stream that ends without a finish reason was
cut and is never taken as an answer; nor is ``MALFORMED_FUNCTION_CALL`` (a call the API could
not parse, with no content at all): both are retried when nothing was passed on, then a clear
error. A ``STOP`` with no part at all (Gemini 2.5 and 3 sometimes answer so, and answer when
asked again) is asked for once more; a second one is the (empty) answer.

Errors (Gemini API "Troubleshooting", https://ai.google.dev/gemini-api/docs/troubleshooting):
429 ``RESOURCE_EXHAUSTED`` is retried, waiting the ``RetryInfo.retryDelay`` its body gives,
unless a quota it names is per day (``...PerDay...``: not retried, ``model_quota_exhausted``);
500, 503 and 504 are retried; 400 ``INVALID_ARGUMENT`` and ``FAILED_PRECONDITION`` are not.

It runs past 800 lines on purpose: one adapter holds both directions of one wire format (what
it sends, what it reads, its errors) and each server behaviour above costs a few lines; split,
one answer would have to be followed across files.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

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
    is_new_call_id,
    new_call_id,
)
from sagents.agent._output import gemini_response_schema, prompted_output
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
from sagents.core._spec import ToolSpec
from sagents.errors import (
    ContextLengthError,
    ModelAuthError,
    ModelConfigError,
    ModelError,
    ModelNotFoundError,
    ModelQuotaError,
    ModelStreamError,
    ModelUnavailableError,
    SchemaExportError,
)
from sagents.tool.export_gemini import (
    GEMINI_PARAMETER_NAME_PATTERN,
    declare_gemini_arguments,
    gemini_function_name,
    restore_gemini_arguments,
    to_gemini_function_declaration,
)

if TYPE_CHECKING:
    from google.genai import Client
    from google.genai.types import ContentDict, GenerateContentConfigDict

__all__ = ["PROVIDER", "SKIP_SIGNATURE", "GeminiModel"]

PROVIDER = "gemini"
"""The ``provider`` of the :class:`ReasoningPart`\\ s this adapter makes (and sends back)."""

SKIP_SIGNATURE = "skip_thought_signature_validator"
"""The placeholder signature of a function call whose own did not survive (Gemini API,
"Thought signatures", FAQ)."""

THOUGHT = "thought"
"""The ``id`` of a :class:`ReasoningPart` that is a ``thought`` part; one without an id holds
the signature of the part after it."""

_DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"
_EARLIER_INVENTED = "gemini-call-"  # the ids this adapter gave calls before new_call_id
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
_MALFORMED = "MALFORMED_FUNCTION_CALL"  # a call the API could not parse: no answer
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
logger = logging.getLogger(__name__)


def _sdk() -> Any:
    try:
        import google.genai as genai
    except ImportError as error:
        raise ModelConfigError(
            "the Gemini adapter needs the google-genai SDK, which is not installed",
            hint="install the extra: pip install 'sagents[gemini]'",
            details={"extra": "gemini"},
        ) from error
    return genai


class GeminiModel:
    """A Gemini model behind the Gemini API (``generateContent``).

    Args:
        model: The model name (``gemini-...``; a ``gemini:`` prefix is dropped).
        base_url: The API's root (without ``/v1beta``); the SDK's default (or
            ``GOOGLE_GEMINI_BASE_URL``) when None.
        api_key: The key; ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``) when None.
        stream: Stream the answer (default); False asks for it whole, with the same events.
        timeout: Seconds to wait for the connection and for each next chunk of the answer.
        deadline: Seconds one call may take in all, retries included; None: no limit.
        max_retries: Retries of a retryable failure (see the module docstring).
        max_retry_wait: The longest wait before a retry the call accepts.
        thinking: The request's ``thinking_config`` (``{"include_thoughts": True}``).
        extra_body: Extra JSON fields of every request.
        client: A ``google.genai.Client`` to use instead of building one.

    Raises:
        ModelConfigError: no model name or no key, or the SDK is missing (the message names
            the extra ``sagents[gemini]``).
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
        thinking: Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        client: Client | None = None,
    ) -> None:
        self.limits = CallLimits(
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
        )
        genai = _sdk()
        self.model = (model or "").removeprefix(f"{PROVIDER}:")
        if not self.model:
            raise ModelConfigError(
                "no Gemini model name is configured",
                hint="pass model='gemini:gemini-...' (SAGENTS_MODEL, `--model`)",
            )
        self.streaming = stream
        self.thinking = dict(thinking) if thinking is not None else None
        self.extra_body = dict(extra_body or {})
        self._exported = Exported(_declaration)
        # the model refused a JSON answer format beside function declarations (models before
        # Gemini 3): the schema is asked for in the system instruction from then on
        self._json_refused_beside_tools = False
        if client is None:
            api_key = configured_api_key(api_key, "GEMINI_API_KEY", "GOOGLE_API_KEY")
            if api_key is None:
                raise ModelConfigError(
                    "no Gemini API key is configured",
                    hint="set GEMINI_API_KEY (or pass api_key=...), and base_url= for an "
                    "endpoint other than Google's own",
                )
            options: dict[str, Any] = {
                "timeout": int(timeout * 1000),
                "async_client_args": {"transport": WithoutSseComments()},
            }
            base_url = configured_base_url(base_url, "GOOGLE_GEMINI_BASE_URL")
            if base_url:
                options["base_url"] = base_url
            client = genai.Client(api_key=api_key, http_options=options)
        self.client = client
        self.base_url = base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or _DEFAULT_BASE_URL

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.aio.aclose()

    def request_parts(self, request: ModelRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The ``contents`` and the ``config`` of the request for ``request``."""
        return self._request_parts(request, _Declared(request.tools, self._exported))

    def _request_parts(
        self, request: ModelRequest, declared: _Declared
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        contents = _contents(request.messages, declared)
        config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
        if request.system_prompt:
            config["system_instruction"] = request.system_prompt
        if declared.declarations:
            config["tools"] = [{"function_declarations": declared.declarations}]
        config.update(_settings_fields(request.settings, declared))
        output = request.output
        schema = None if output is None else gemini_response_schema(output)
        refused = declared.declarations and self._json_refused_beside_tools
        if output is not None and (schema is None or refused):
            config["system_instruction"] = "\n\n".join(
                p for p in (request.system_prompt, prompted_output(output)) if p
            )
        elif schema is not None:  # "Structured output": a JSON answer of this schema
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = schema
        if self.thinking is not None:
            config["thinking_config"] = dict(self.thinking)
        if self.extra_body:
            config["http_options"] = {"extra_body": dict(self.extra_body)}
        return contents, config

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """One model call on the model seam: the answer as neutral events, ending with one
        :class:`~sagents.agent.Finish`.

        Raises:
            ModelAuthError: HTTP 401/403.
            ModelNotFoundError: HTTP 404.
            ContextLengthError: the input is too long for the model.
            ModelQuotaError: a daily quota is used up (never retried).
            ModelUnavailableError: retryable failures outlasted the retries, or the server asked
                for a longer wait than ``max_retry_wait``.
            ModelTimeoutError: nothing came for ``timeout`` seconds, or ``deadline`` passed.
            ModelStreamError: the streamed answer broke off or ended without a finish reason.
            ModelError: any other error answer.
        """
        genai = _sdk()
        declared = _Declared(request.tools, self._exported)
        raw_contents, raw_config = self._request_parts(request, declared)
        if not raw_contents:  # google-genai refuses it before sending ("contents are required.")
            raise ModelError(
                "the Gemini API needs at least one user or model message in the contents; "
                "the history has none (a system prompt alone is its system_instruction)",
                hint="start the run with a user message",
            )
        # Sent as the dicts they are: the SDK deep-copies a validated config (about 500 Python
        # calls a request) and inspects validated contents attribute by attribute, where it
        # only validates dicts (bench/bench_agent_loop.py).
        contents = cast("list[ContentDict]", raw_contents)  # the SDK validates them
        config = cast("GenerateContentConfigDict", raw_config)
        models = self.client.aio.models
        budget = CallBudget.of(self)
        asked_again = False  # an answer with no part at all is asked for once more
        while True:
            answer = _Answer(declared=declared)
            try:
                if self.streaming:
                    chunks = await budget.bounded(
                        models.generate_content_stream(
                            model=self.model, contents=contents, config=config
                        )
                    )
                    while True:
                        try:
                            chunk = await budget.next(chunks)
                        except StopAsyncIteration:
                            break
                        for out in answer.take(chunk):
                            yield out
                else:
                    whole = await budget.bounded(
                        models.generate_content(model=self.model, contents=contents, config=config)
                    )
                    if not whole.candidates and whole.prompt_feedback is None:
                        raise self._not_an_answer(_shown(whole))
                    for out in answer.take(whole):
                        yield out
                if answer.finish is None:
                    cut = ModelStreamError(
                        f"the answer from {self.base_url!r} ended without a finish reason: it "
                        "was cut off, so it is not taken as an answer",
                        hint="retry the turn; if it keeps happening, check any proxy between",
                    )
                    if answer.passed_on or not budget.can_retry:
                        raise cut
                    await budget.retry(cut)
                    continue
                if answer.finish == _MALFORMED:
                    malformed = ModelError(
                        f"model {self.model!r} wrote a function call the Gemini API could not "
                        "parse (finish reason MALFORMED_FUNCTION_CALL), and nothing else",
                        hint="retry the turn; if it keeps happening, simplify the tools' "
                        "schemas or lower the temperature",
                        details={"finish_reason": _MALFORMED},
                    )
                    if answer.passed_on or not budget.can_retry:
                        raise malformed
                    await budget.retry(malformed)
                    continue
                if answer.finish == "STOP" and not answer.pieces and not asked_again:
                    # Gemini 2.5 and 3 sometimes answer a STOP with no part at all, and answer
                    # when asked again; asked once more, an empty answer is the answer (a model
                    # told to stay quiet answers so)
                    asked_again = True
                    if budget.can_retry:
                        await budget.retry(
                            ModelError(f"model {self.model!r} answered nothing (finish STOP)")
                        )
                        continue
            except genai.errors.APIError as error:
                if "response_mime_type" in raw_config and _json_beside_tools_refused(error):
                    self._json_refused_beside_tools = True  # sent again, the schema prompted
                    raw_config = self._request_parts(request, declared)[1]
                    config = cast("GenerateContentConfigDict", raw_config)
                    continue
                if answer.passed_on or not _retryable(error) or not budget.can_retry:
                    raise self._status_error(error, budget.attempt) from error
                await budget.retry(error, _retry_headers(error))
                continue
            except (httpx.HTTPError, ValueError) as error:
                # ValueError: a chunk that is not JSON, or a request the SDK refused before
                # sending it (a pydantic ValidationError), which sending again would not cure
                if not self.streaming and isinstance(error, json.JSONDecodeError):
                    raise self._not_an_answer(error.doc) from error  # a web page, say
                if isinstance(error, ValueError) and not answer.passed_on:
                    _refuse_what_the_sdk_refuses(genai, raw_contents, raw_config)
                if answer.passed_on or not budget.can_retry:
                    raise broken_answer(
                        self.base_url,
                        error,
                        hint="check the endpoint and that the server runs; retry the turn",
                        attempts=budget.attempt + 1,
                        unreachable=not answer.passed_on
                        and isinstance(error, httpx.TransportError),
                    ) from error
                await budget.retry(error)
                continue
            response = answer.response()
            if response.usage is not None:
                yield response.usage
            yield Finish(response=response)
            return

    def _not_an_answer(self, shown: object) -> ModelError:
        """The error of a whole answer that is not a Gemini response (a web page such as a
        proxy's login, JSON of another shape: no candidates, no prompt feedback)."""
        return not_an_answer(
            self.base_url,
            shown,
            "a Gemini generateContent response",
            hint="check that GOOGLE_GEMINI_BASE_URL points at the API's root (without "
            "/v1beta), not at a web page or a proxy's login",
        )

    def _status_error(self, error: Any, retries: int) -> ModelError:
        status = int(error.code or 0)
        text = str(error.message or error)
        details: dict[str, Any] = {"status": status, "code": str(error.status or "")}
        if status in (401, 403):
            return ModelAuthError(
                f"the Gemini endpoint {self.base_url!r} refused the API key (HTTP {status}): "
                f"{text}",
                hint="set GEMINI_API_KEY (or pass api_key=...) to a key this endpoint accepts",
                details=details,
            )
        if status == 404:
            return ModelNotFoundError(
                f"model {self.model!r} or the endpoint {self.base_url!r} was not found "
                f"(HTTP 404): {text}",
                hint="check the model name against the API's model list",
                details=details,
            )
        if says_context_length(text):
            return ContextLengthError(
                f"the conversation is too long for model {self.model!r}: {text}",
                hint="start a new conversation, or shorten the history",
                details=details,
            )
        if status == 429 and _daily_quota(error):
            return ModelQuotaError(
                f"the Gemini endpoint {self.base_url!r} says a daily quota is used up "
                f"(HTTP 429): {text}",
                hint="wait for the quota to reset, or check the plan and billing of the key",
                details=details,
            )
        if _retryable(error):
            return ModelUnavailableError(
                f"the Gemini endpoint {self.base_url!r} kept failing (HTTP {status}) after "
                f"{retries} retries: {text}",
                hint="try again later",
                details=details,
            )
        return ModelError(
            f"the Gemini endpoint {self.base_url!r} rejected the request (HTTP {status}, "
            f"{error.status}): {text}",
            hint="sending it again would fail the same way: the API does not accept this request",
            details=details,
        )


def _refuse_what_the_sdk_refuses(
    genai: Any, contents: list[dict[str, Any]], config: dict[str, Any]
) -> None:
    """Raise the SDK's own ``ValidationError`` for a request's contents or config, naming the
    content or the field it refuses (the SDK's error on its whole parameters lists every
    form a content may take). Checked only once the SDK raised: validating every request
    before sending it was a tool turn's largest own cost (bench/bench_agent_loop.py).

    Raises:
        pydantic.ValidationError: a content or the config is not one the SDK accepts.
    """
    for content in contents:
        genai.types.Content.model_validate(content)
    genai.types.GenerateContentConfig.model_validate(config)


class WithoutSseComments(httpx.AsyncBaseTransport):
    """An HTTP transport that drops SSE comment lines (``: keep-alive``) from event streams.

    A client ignores them (HTML, "Server-sent events", "Interpreting an event stream": a line
    starting with a colon), and proxies send them while an answer waits; google-genai's reader
    takes such a line for a piece of JSON and breaks the stream. Dropped here, they neither
    break it nor count as a piece of the answer for the idle ``timeout``.
    """

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CommentFree(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CommentFree(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        partial = b""  # the start of a line whose end has not come yet
        async for chunk in self._stream:
            if (
                not partial
                and chunk.endswith(b"\n")
                and not chunk.startswith(b":")
                and b"\n:" not in chunk
            ):
                # Whole lines, none a comment: passed on as they came, without splitting
                # them (this runs on every chunk: bench/bench_agent_loop.py, streamed turns).
                yield chunk
                continue
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()
            kept = [line for line in lines if not line.startswith(b":")]
            if kept:
                yield b"\n".join(kept) + b"\n"
        if partial and not partial.startswith(b":"):
            yield partial

    async def aclose(self) -> None:
        await self._stream.aclose()


def _error_details(error: Any) -> list[Mapping[str, Any]]:
    body = error.details
    if isinstance(body, Mapping):
        body = body.get("error", body)
    details = body.get("details") if isinstance(body, Mapping) else None
    return [d for d in details or () if isinstance(d, Mapping)]


def _daily_quota(error: Any) -> bool:
    for detail in _error_details(error):
        if detail.get("@type") == _QUOTA_FAILURE:
            for violation in detail.get("violations") or ():
                if "PerDay" in str(violation.get("quotaId") or ""):
                    return True
    return False


def _retryable(error: Any) -> bool:
    if error.code == 429 and _daily_quota(error):
        return False
    return error.code in _RETRYABLE_STATUS


def _retry_headers(error: Any) -> dict[str, str]:
    """The wait the error asks for, as headers :func:`~sagents.agent._retry.retry_delay` reads:
    the response's ``Retry-After``, else the body's ``RetryInfo.retryDelay`` (``"24s"``)."""
    headers: dict[str, str] = {}
    response = getattr(error, "response", None)
    for name in ("retry-after", "retry-after-ms"):
        value = getattr(response, "headers", {}).get(name) if response is not None else None
        if value is not None:
            headers[name] = str(value)
    if not headers:
        for detail in _error_details(error):
            delay = detail.get("retryDelay")
            if detail.get("@type") == _RETRY_INFO and isinstance(delay, str):
                headers["retry-after"] = delay.removesuffix("s")
    return headers


class _Declared:
    """The tools of one request as declared to Gemini, and the way back from their names."""

    def __init__(
        self,
        tools: tuple[ToolSpec, ...],
        declare: Callable[[ToolSpec, str], tuple[dict[str, Any], bool]],
    ) -> None:
        self.declarations: list[dict[str, Any]] = []
        self.specs: dict[str, ToolSpec] = {}  # declared name -> spec
        self.names: dict[str, str] = {}  # the name the loop knows -> declared name
        self.renaming: set[str] = set()  # declared names of tools with renamed parameters
        for spec in tools:
            declared = gemini_function_name(spec.name)
            try:
                declaration, renames = declare(spec, declared)
            except SchemaExportError as error:
                logger.warning("tool %r is not offered to Gemini: %s", spec.name, error)
                continue
            self.declarations.append(dict(declaration))  # a copy of the one the adapter keeps
            self.specs[declared] = spec
            self.names[spec.name] = declared
            if renames:
                self.renaming.add(declared)

    def call_of(self, name: str, args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The loop's name and arguments of a call Gemini made."""
        spec = self.specs.get(name)
        if spec is None:
            return name, dict(args)
        if name not in self.renaming:
            return spec.name, dict(args)
        return spec.name, restore_gemini_arguments(spec.input_schema, args)

    def declared(self, name: str, arguments: str) -> tuple[str, dict[str, Any]]:
        """A call of the history as Gemini declared it."""
        try:
            args = json.loads(arguments or "{}", strict=False)  # as the call was read
        except ValueError:
            args = {}
        if not isinstance(args, dict):
            args = {}
        declared = self.names.get(name, gemini_function_name(name))
        spec = self.specs.get(declared)
        if spec is not None and declared in self.renaming:
            args = declare_gemini_arguments(spec.input_schema, args)
        return declared, args


def _declaration(spec: ToolSpec, name: str) -> tuple[dict[str, Any], bool]:
    """``spec`` as :func:`to_gemini_function_declaration` declares it under ``name``, and
    whether a parameter is declared under another name (the adapter keeps both).

    Raises:
        SchemaExportError: the schema cannot be declared to Gemini.
    """
    return to_gemini_function_declaration(spec, name=name), _renames(spec.input_schema)


def _renames(schema: Any) -> bool:
    """Whether a parameter of ``schema`` may be declared under another name: a property name,
    anywhere in it, that Gemini refuses (``$defs`` included). Without one, a call's arguments
    go both ways as they are, and deriving the declared schema again for each call (what
    :func:`restore_gemini_arguments` does) was most of a tool turn's own work
    (bench/bench_agent_loop.py)."""
    nodes = [schema]
    while nodes:
        node = nodes.pop()
        if isinstance(node, Mapping):
            properties = node.get("properties")
            if isinstance(properties, Mapping) and not all(
                isinstance(name, str) and GEMINI_PARAMETER_NAME_PATTERN.match(name)
                for name in properties
            ):
                return True
            nodes.extend(node.values())
        elif isinstance(node, list):
            nodes.extend(node)
    return False


def _signature_text(value: Any) -> str | None:
    """A signature as kept in a :class:`ReasoningPart`: base64 text, as the wire carries it."""
    if not value:
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _signature_bytes(text: str) -> bytes:
    """The bytes of a signature's base64 text, standard or URL-safe (the API reads both; the
    SDK writes the URL-safe form)."""
    standard = text.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        return text.encode("utf-8")


@dataclass(kw_only=True)
class _Piece:
    kind: str  # "thought", "text" or "call"
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    call: ToolCall | None = None


@dataclass(kw_only=True)
class _Answer:
    declared: _Declared
    pieces: list[_Piece] = field(default_factory=list)
    calls: int = 0
    finish: str | None = None
    usage: Usage | None = None
    passed_on: bool = False

    def take(self, chunk: Any) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        metadata = chunk.usage_metadata
        if metadata is not None and metadata.prompt_token_count is not None:
            thoughts = metadata.thoughts_token_count
            self.usage = Usage(
                prompt_tokens=metadata.prompt_token_count or 0,
                completion_tokens=(metadata.candidates_token_count or 0) + (thoughts or 0),
                cached_tokens=metadata.cached_content_token_count,
                reasoning_tokens=thoughts,
            )
        feedback = chunk.prompt_feedback
        if not chunk.candidates and feedback is not None and feedback.block_reason:
            self.finish = "SAFETY"  # the prompt itself was blocked
        for candidate in (chunk.candidates or ())[:1]:
            content = candidate.content
            for part in (content.parts if content is not None else None) or ():
                out.extend(self._part(part))
            if candidate.finish_reason is not None:
                self.finish = str(
                    getattr(candidate.finish_reason, "value", candidate.finish_reason)
                )
        self.passed_on = self.passed_on or bool(out)
        return out

    def _part(self, part: Any) -> list[ModelEvent]:
        signature = _signature_text(part.thought_signature)
        last = self.pieces[-1] if self.pieces else None
        if part.function_call is not None:
            name, args = self.declared.call_of(
                part.function_call.name or "", part.function_call.args or {}
            )
            call_id = part.function_call.id or new_call_id()
            arguments = json.dumps(args, ensure_ascii=False)
            call = ToolCall(id=call_id, name=name, arguments=arguments)
            self.pieces.append(_Piece(kind="call", signature=signature, call=call))
            index = self.calls
            self.calls += 1
            return [
                ToolCallStart(index=index, id=call_id, name=name),
                ToolCallArgumentsDelta(index=index, arguments=arguments),
                ToolCallEnd(index=index, call=call),
            ]
        text = part.text
        if text is None and signature is None:
            return []
        kind = "thought" if part.thought else "text"
        if last is not None and last.kind == kind and last.signature is None:
            piece = last  # the stream's pieces of one part; a signature closes it
        else:
            piece = _Piece(kind=kind)
            self.pieces.append(piece)
        if signature is not None:
            piece.signature = signature
        if not text:
            return []
        piece.text.append(text)
        return [ReasoningDelta(text=text) if kind == "thought" else TextDelta(text=text)]

    def response(self) -> ModelResponse:
        parts: list[Part] = []
        for piece in self.pieces:
            text = "".join(piece.text)
            if piece.kind == "thought":
                parts.append(
                    ReasoningPart(
                        text=text, signature=piece.signature, id=THOUGHT, provider=PROVIDER
                    )
                )
                continue
            if piece.signature is not None:
                parts.append(ReasoningPart(text="", signature=piece.signature, provider=PROVIDER))
            if piece.call is not None:
                parts.append(piece.call)
            elif text:
                parts.append(TextPart(text=text))
        has_calls = self.calls > 0
        reason = _FINISH.get(self.finish or "", "other")
        if reason == "stop" and has_calls:
            reason = "tool_calls"
        return ModelResponse(
            message=Message(role="assistant", parts=tuple(parts)),
            finish_reason=reason,
            usage=self.usage,
        )


def _sendable_id(call_id: str) -> bool:
    """Whether a call's id goes to Gemini: not one sagents made for a call that came without
    one (endpoints refuse an id they did not give: 'Unknown name "id" at ...function_call');
    the call and its response then go by name."""
    return (
        bool(call_id) and not is_new_call_id(call_id) and not call_id.startswith(_EARLIER_INVENTED)
    )


def _model_parts(message: Message, declared: _Declared) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    pending: str | None = None  # a signature that belongs to the next part
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if part.provider != PROVIDER:
                continue  # another provider's reasoning: Gemini reads nothing from it
            if part.id == THOUGHT:
                thought: dict[str, Any] = {"text": part.text, "thought": True}
                if part.signature:
                    thought["thought_signature"] = _signature_bytes(part.signature)
                parts.append(thought)
            else:
                pending = part.signature
            continue
        item: dict[str, Any]
        if isinstance(part, TextPart):
            if not part.text:
                continue
            item = {"text": part.text}
        elif isinstance(part, ToolCall):
            name, args = declared.declared(part.name, part.arguments)
            call: dict[str, Any] = {"name": name, "args": args}
            if _sendable_id(part.id):
                call["id"] = part.id
            item = {"function_call": call}
            # The first call of a turn carries the turn's signature; a call whose signature
            # was lost gets the documented placeholder (Gemini 3 refuses it without one).
            first = not any("function_call" in p for p in parts)
            if pending is None and first:
                pending = SKIP_SIGNATURE
        else:
            continue
        if pending is not None:
            item["thought_signature"] = _signature_bytes(pending)
            pending = None
        parts.append(item)
    if pending is not None:  # a signature on an empty closing part, as it came
        parts.append({"text": "", "thought_signature": _signature_bytes(pending)})
    return parts


def _contents(history: tuple[Message, ...], declared: _Declared) -> list[dict[str, Any]]:
    """The ``contents``: consecutive user-side parts (one answer's function responses, a user
    message after them) in one ``user`` content."""
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> the declared name, for the responses
    for message in history:
        if message.role == "assistant":
            for tool_call in message.tool_calls:
                names[tool_call.id] = declared.declared(tool_call.name, "{}")[0]
            parts = _model_parts(message, declared)
            if parts:
                contents.append({"role": "model", "parts": parts})
            continue
        parts = []
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                response: dict[str, Any] = {
                    "name": names.get(part.tool_call_id, "unknown"),
                    "response": {"output": part.content},
                }
                if _sendable_id(part.tool_call_id):
                    response["id"] = part.tool_call_id
                parts.append({"function_response": response})
            elif isinstance(part, TextPart) and part.text:
                parts.append({"text": part.text})
        if not parts:
            continue
        if contents and contents[-1]["role"] == "user":
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": "user", "parts": parts})
    return contents


def _json_beside_tools_refused(error: Any) -> bool:
    """Whether the API refused a JSON answer format beside function declarations (HTTP 400
    "Function calling with a response mime type: 'application/json' is unsupported", or "Tool
    use with ...": Gemini models before Gemini 3)."""
    text = str(error.message or "").lower()
    return error.code == 400 and "response mime type" in text and "unsupported" in text


def _settings_fields(settings: ModelSettings, declared: _Declared) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if settings.temperature is not None:
        fields["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        fields["max_output_tokens"] = settings.max_tokens
    choice = settings.tool_choice
    if declared.declarations and choice is not None:
        modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
        config: dict[str, Any] = {"mode": modes.get(choice, "ANY")}
        if choice not in modes:
            config["allowed_function_names"] = [declared.names.get(choice, choice)]
        fields["tool_config"] = {"function_calling_config": config}
    return fields


def _shown(whole: Any) -> object:
    """What came of a whole answer that is not a Gemini response: its body when the SDK kept
    it, else its content type and what the SDK read of it (it drops the fields it does not
    know)."""
    http = whole.sdk_http_response
    if http is not None and http.body:
        return http.body
    headers = {name.lower(): value for name, value in ((http and http.headers) or {}).items()}
    read = whole.model_dump(exclude={"sdk_http_response"}, exclude_none=True)
    return (
        f"an answer of type {headers.get('content-type', 'unknown')} without candidates or "
        "promptFeedback "
        f"(the SDK read {read})"
    )

"""How an OpenAI API's error answer is read: retried or not, and the error that says what to check.

Chat Completions (``_model.py``) and the Responses API (``_responses.py``) answer errors the same
way (OpenAI API reference, "Error codes"); OpenAI-compatible servers send the same shape, some
with their own bodies (docs/agent.md, "Servers' quirks").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai

from sagents.agent._retry import says_context_length
from sagents.errors import (
    ContextLengthError,
    ModelAuthError,
    ModelError,
    ModelNotFoundError,
    ModelQuotaError,
    ModelUnavailableError,
)

__all__ = ["NOT_AN_OPENAI_API", "openai_error_in_stream", "openai_retryable", "openai_status_error"]

NOT_AN_OPENAI_API = (
    "check that OPENAI_BASE_URL (--base-url) points at an OpenAI-compatible API, "
    "usually ending in /v1, and not at a web page or a proxy's login"
)
"""The hint of an answer that is not the API's (:func:`sagents.agent._retry.not_an_answer`)."""

_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
# Error codes of a 429 that waiting does not cure (OpenAI API reference, "Error codes").
_NO_QUOTA_CODES = frozenset(
    {"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "access_terminated"}
)
# A 5xx whose body says this is a validation failure of the request: sending it again fails
# again. llama-cpp-python's server answers 500 with the exception's message (docs/agent.md,
# "Servers' quirks"): pydantic's for a request it cannot read, and its chat handler's
# "Tool with name '...' not found in tools" for a tool_choice naming no tool of the request.
# Codes of a request the model, not the request, failed: it wrote a tool call the server could
# not parse (Groq's tool_use_failed, type invalid_request_error, status 400), which the same
# request usually gets right when asked again (docs/agent.md, "Servers' quirks").
_MODEL_FAILED_CODES = frozenset({"tool_use_failed"})
_INVALID_REQUEST_MARKERS = (
    "validation error",
    "input should be",
    "invalid_request_error",
    "not found in tools",
)


@dataclass(frozen=True, kw_only=True)
class _Failure:
    """An error answer of an OpenAI API, however it came: its HTTP status, or in a 200 stream
    the status its ``code`` gives (None when it gives none), and its ``error`` object."""

    status: int | None
    body: Mapping[str, Any]
    fallback: str
    """The SDK's message, for a body that says nothing."""

    @classmethod
    def of(cls, error: openai.APIStatusError) -> _Failure:
        return cls(status=error.status_code, body=_error_object(error.body), fallback=error.message)


def openai_retryable(error: openai.APIStatusError) -> bool:
    """Whether an error answer of an OpenAI API is worth sending again: 408, 409, 429 and 5xx,
    but not a 429 saying the quota is gone, nor a 5xx whose body is a validation error or a
    refusal of the request's length (llama.cpp's server answered it with HTTP 500)."""
    return _retryable(_Failure.of(error))


def openai_status_error(
    error: openai.APIStatusError, *, endpoint: str, model: str, retries: int
) -> ModelError:
    """The :class:`~sagents.errors.ModelError` of an OpenAI API's error answer (Chat
    Completions and Responses share them: OpenAI API reference, "Error codes")."""
    return _model_error(_Failure.of(error), endpoint=endpoint, model=model, retries=retries)


def openai_error_in_stream(
    error: openai.APIError, *, endpoint: str, model: str
) -> ModelError | None:
    """The error of an ``{"error": {...}}`` event a server sent inside a 200 stream (the SDK
    raises it as a bare :class:`openai.APIError` whose body is that object) when sending the
    request again cannot cure it, read as the status its ``code`` names would be (OpenRouter
    sends the number, LiteLLM's proxy the number as a string; docs/agent.md, "Servers'
    quirks"): a refused request, a prompt past the context window, no quota or credit left.
    None for anything else (a server error, a rate limit, a code that names no status), which
    is a broken stream: retried while nothing of the answer was passed on."""
    if type(error) is not openai.APIError or not isinstance(error.body, Mapping):
        return None  # a connection error, a timeout, or an error that carries no object
    failure = _Failure(status=_status_of(error.body), body=error.body, fallback=error.message)
    transient = failure.status is None or failure.status in _RETRYABLE_STATUS
    if _model_failed(failure) or (transient and _retryable(failure, status=failure.status or 500)):
        return None
    return _model_error(failure, endpoint=endpoint, model=model, retries=0)


def _status_of(body: Mapping[str, Any]) -> int | None:
    """The HTTP status an in-stream error's ``code`` names (``502``, ``"429"``; Groq's
    ``status_code``), else None."""
    for code in (body.get("code"), body.get("status_code")):
        if isinstance(code, str) and code.isdigit():
            code = int(code)
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
            return code
    return None


def _model_failed(failure: _Failure) -> bool:
    return str(failure.body.get("code") or "") in _MODEL_FAILED_CODES


def _retryable(failure: _Failure, *, status: int | None = None) -> bool:
    if _model_failed(failure):
        return True
    status = failure.status if status is None else status
    if status not in _RETRYABLE_STATUS:
        return False
    if status == 429 and _no_quota(failure):
        return False
    if says_context_length(_described(failure)):
        return False
    return not (status >= 500 and _is_invalid_request(failure))


def _model_error(failure: _Failure, *, endpoint: str, model: str, retries: int) -> ModelError:
    status = failure.status
    text = _error_text(failure)
    details: dict[str, Any] = {"status": status}
    said = f"HTTP {status}" if status is not None else "an error in its stream"
    if status in (401, 403):
        return ModelAuthError(
            f"the model endpoint {endpoint!r} refused the API key ({said}): {text}",
            hint="set OPENAI_API_KEY (or pass api_key=...) to a key this endpoint accepts",
            details=details,
        )
    if status == 404:
        return ModelNotFoundError(
            f"model {model!r} or the endpoint {endpoint!r} was not found ({said}): {text}",
            hint=(
                "check SAGENTS_MODEL (--model) against the server's model list, and that "
                "OPENAI_BASE_URL (--base-url) ends where the API starts (usually /v1)"
            ),
            details=details,
        )
    if says_context_length(_described(failure)):
        return ContextLengthError(
            f"the conversation is too long for model {model!r}: {text}",
            hint="start a new conversation, or shorten the history",
            details=details,
        )
    if status == 402:  # OpenRouter's and DeepSeek's "insufficient credits / balance"
        return ModelQuotaError(
            f"the model endpoint {endpoint!r} says the account has no credit left ({said}): {text}",
            hint="add credit to (or check the billing of) the account behind OPENAI_API_KEY",
            details=details,
        )
    if _no_quota(failure):
        return ModelQuotaError(
            f"the model endpoint {endpoint!r} says the account has no quota left ({said}): {text}",
            hint="check the plan and billing of the account behind OPENAI_API_KEY",
            details=details,
        )
    if _model_failed(failure):
        return ModelError(
            f"model {model!r} kept failing to write a tool call the endpoint {endpoint!r} "
            f"could parse ({said}) after {retries} retries: {text}",
            hint="retry the turn; if it keeps happening, simplify the tools' schemas, offer "
            "fewer tools, or use a model better at tool calling",
            details=details,
        )
    if status in _RETRYABLE_STATUS and not _is_invalid_request(failure):
        return ModelUnavailableError(
            f"the model endpoint {endpoint!r} kept failing ({said}) after "
            f"{retries} retries: {text}",
            hint="try again later",
            details=details,
        )
    return ModelError(
        f"the model endpoint {endpoint!r} rejected the request ({said}): {text}",
        hint=(
            "sending it again would fail the same way: the server does not accept this "
            'request (see docs/agent.md, "Servers\' quirks"; check its logs and version)'
        ),
        details=details,
    )


def _error_object(body: object) -> Mapping[str, Any]:
    """The ``error`` object of an error answer (the body itself when it has none)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return inner
    return {}


def _no_quota(failure: _Failure) -> bool:
    body = failure.body
    return str(body.get("code") or body.get("type")) in _NO_QUOTA_CODES


def _described(failure: _Failure) -> str:
    """The error's message, type and code in one text (the SDK's message when the body has
    none of them)."""
    body = failure.body
    text = " ".join(str(body.get(key) or "") for key in ("message", "type", "code"))
    return text if text.strip() else failure.fallback


def _is_invalid_request(failure: _Failure) -> bool:
    text = _described(failure).lower()
    return any(marker in text for marker in _INVALID_REQUEST_MARKERS)


def _error_text(failure: _Failure) -> str:
    body = failure.body
    if body:
        parts = [str(body.get("message") or "")]
        if body.get("code"):
            parts.append(f"[{body['code']}]")
        return " ".join(p for p in parts if p) or json.dumps(dict(body), default=str)
    return failure.fallback

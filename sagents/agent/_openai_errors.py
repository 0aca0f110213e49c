"""How an OpenAI API's error answer is read: retried or not, and the error that says what to check.

Chat Completions (``_model.py``) and the Responses API (``_responses.py``) answer errors the same
way (OpenAI API reference, "Error codes"); OpenAI-compatible servers send the same shape, some
with their own bodies (docs/agent.md, "Servers' quirks").
"""

from __future__ import annotations

import json
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

__all__ = ["NOT_AN_OPENAI_API", "openai_retryable", "openai_status_error"]

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
_INVALID_REQUEST_MARKERS = (
    "validation error",
    "input should be",
    "invalid_request_error",
    "not found in tools",
)


def openai_retryable(error: openai.APIStatusError) -> bool:
    """Whether an error answer of an OpenAI API is worth sending again: 408, 409, 429 and 5xx,
    but not a 429 saying the quota is gone, nor a 5xx whose body is a validation error or a
    refusal of the request's length (llama.cpp's server answered it with HTTP 500)."""
    if error.status_code not in _RETRYABLE_STATUS:
        return False
    if error.status_code == 429 and _no_quota(error):
        return False
    if says_context_length(_described(error)):
        return False
    return not (error.status_code >= 500 and _is_invalid_request(error))


def openai_status_error(
    error: openai.APIStatusError, *, endpoint: str, model: str, retries: int
) -> ModelError:
    """The :class:`~sagents.errors.ModelError` of an OpenAI API's error answer (Chat
    Completions and Responses share them: OpenAI API reference, "Error codes")."""
    status = error.status_code
    text = _error_text(error)
    details: dict[str, Any] = {"status": status}
    if status in (401, 403):
        return ModelAuthError(
            f"the model endpoint {endpoint!r} refused the API key (HTTP {status}): {text}",
            hint="set OPENAI_API_KEY (or pass api_key=...) to a key this endpoint accepts",
            details=details,
        )
    if status == 404:
        return ModelNotFoundError(
            f"model {model!r} or the endpoint {endpoint!r} was not found (HTTP 404): {text}",
            hint=(
                "check SAGENTS_MODEL (--model) against the server's model list, and that "
                "OPENAI_BASE_URL (--base-url) ends where the API starts (usually /v1)"
            ),
            details=details,
        )
    if says_context_length(_described(error)):
        return ContextLengthError(
            f"the conversation is too long for model {model!r}: {text}",
            hint="start a new conversation, or shorten the history",
            details=details,
        )
    if status == 429 and _no_quota(error):
        return ModelQuotaError(
            f"the model endpoint {endpoint!r} says the account has no quota left "
            f"(HTTP 429): {text}",
            hint="check the plan and billing of the account behind OPENAI_API_KEY",
            details=details,
        )
    if status in _RETRYABLE_STATUS and not _is_invalid_request(error):
        return ModelUnavailableError(
            f"the model endpoint {endpoint!r} kept failing (HTTP {status}) after "
            f"{retries} retries: {text}",
            hint="try again later",
            details=details,
        )
    return ModelError(
        f"the model endpoint {endpoint!r} rejected the request (HTTP {status}): {text}",
        hint=(
            "sending it again would fail the same way: the server does not accept this "
            'request (see docs/agent.md, "Servers\' quirks"; check its logs and version)'
        ),
        details=details,
    )


def _error_body(error: openai.APIStatusError) -> dict[str, Any]:
    """The ``error`` object of an error answer (the body itself when it has none)."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return inner
    return {}


def _no_quota(error: openai.APIStatusError) -> bool:
    body = _error_body(error)
    return str(body.get("code") or body.get("type")) in _NO_QUOTA_CODES


def _described(error: openai.APIStatusError) -> str:
    """The error's message, type and code in one text (the SDK's message when the body has
    none of them)."""
    body = _error_body(error)
    text = " ".join(str(body.get(key) or "") for key in ("message", "type", "code"))
    return text if text.strip() else str(error.message)


def _is_invalid_request(error: openai.APIStatusError) -> bool:
    text = _described(error).lower()
    return any(marker in text for marker in _INVALID_REQUEST_MARKERS)


def _error_text(error: openai.APIStatusError) -> str:
    body = error.body
    inner = _error_body(error)
    if inner:
        parts = [str(inner.get("message") or "")]
        if inner.get("code"):
            parts.append(f"[{inner['code']}]")
        return " ".join(p for p in parts if p) or json.dumps(body)
    return str(error.message)

"""The AG-UI route's error replies: JSON ``{"error", "message"}`` with the status of
docs/chat.md ("Bad input")."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.responses import JSONResponse

__all__ = ["decisions_needed", "error_reply", "unauthorized", "validation_text"]


def error_reply(status: int, code: str, message: str) -> JSONResponse:
    """``{"error": code, "message": message}`` with ``status``."""
    return JSONResponse({"error": code, "message": message}, status_code=status)


def unauthorized() -> JSONResponse:
    """401: nobody the route knows."""
    return error_reply(401, "unauthorized", "log in, or send Authorization: Bearer TOKEN")


def decisions_needed(ids: list[str]) -> JSONResponse:
    """409: a new message while the thread's run waits for ``ids``."""
    return error_reply(
        409,
        "decisions_needed",
        f"the thread's run waits for {', '.join(ids)}: answer in "
        "forwardedProps.sagents.decisions (without a new message), or cancel with "
        "forwardedProps.sagents.cancel",
    )


def validation_text(error: ValidationError) -> str:
    """What is wrong with a body that is not a ``RunAgentInput`` (the first five problems)."""
    problems = [
        f"{'.'.join(str(p) for p in item['loc']) or 'body'}: {item['msg']}"
        for item in error.errors(include_url=False)[:5]
    ]
    return "not a RunAgentInput: " + "; ".join(problems)

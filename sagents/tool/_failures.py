"""How a failed tool call becomes its result: the mapping of ``ToolManager.run_tool``'s one
exception->result boundary (docs/architecture.md, "Where errors become results").
"""

from __future__ import annotations

import asyncio
import logging

import anyio

from sagents.core._result import ToolResult
from sagents.errors import SagentsError, ToolTimeoutError

__all__ = ["cancellation_requested", "describe_error", "error_result", "timed_out"]

# the registry's log (operators filter on its name)
logger = logging.getLogger("sagents.tool.tool_manager")


def error_result(error: BaseException, tool: str) -> ToolResult:
    """The one exception->result boundary of a tool call (``ToolManager.run_tool``'s).

    A :class:`~sagents.errors.SagentsError` (the call's timeout, unknown names, invalid
    arguments, an upstream's typed failure) keeps its code; any other exception of the
    handler is an ``execution_error`` (``SystemExit`` too: a tool calling ``sys.exit()`` must
    not end the host); a stray cancellation exception, raised while nobody cancels the task
    (the tool awaited a future someone else cancelled), is an ``execution_error`` as well,
    since letting it out would unwind the caller as if it were cancelled. KeyboardInterrupt
    and real cancellation never get here (docs/architecture.md, "Where errors become results").
    """
    if isinstance(error, SagentsError):
        logger.info("tool %r failed: [%s] %s", tool, error.code, error.message)
        return ToolResult.from_exception(error)
    if isinstance(error, anyio.get_cancelled_exc_class()):
        logger.error("tool %r raised a stray cancellation", tool, exc_info=error)
        return ToolResult.from_error(
            "execution_error",
            f"tool {tool!r} failed: it raised {type(error).__name__} "
            "although the call was not cancelled",
            details={"exception": type(error).__name__},
        )
    logger.error("tool %r raised", tool, exc_info=error)
    return ToolResult.from_error(
        "execution_error",
        f"tool {tool!r} failed: {describe_error(error)}",
        details={"exception": type(error).__name__},
    )


def cancellation_requested() -> bool:
    """True when this task is really being cancelled (not a stray cancellation exception).

    On asyncio a ``CancelledError`` can be raised without anyone cancelling the task (awaiting
    a future cancelled elsewhere); ``Task.cancelling()`` (Python 3.11) counts the real
    requests, which anyio's cancel scopes also make. On trio a ``Cancelled`` always comes from
    a scope, so it is always real.
    """
    try:
        task = asyncio.current_task()  # only asks; no asyncio API drives anything here
    except RuntimeError:  # no asyncio loop: trio
        return True
    return task is None or task.cancelling() > 0


def timed_out(tool_name: str, limit: float) -> ToolTimeoutError:
    return ToolTimeoutError(
        f"tool {tool_name!r} did not finish within {limit:g} seconds",
        hint="Try again with a smaller request, or ask for a longer timeout.",
        details={"timeout": limit},
    )


def describe_error(error: BaseException) -> str:
    """``Type: message``; the leaves of an exception group (a tool's task group), joined."""
    if isinstance(error, ExceptionGroup):
        return "; ".join(describe_error(leaf) for leaf in error.exceptions)
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a broken __str__ must not escape run_tool
        message = "(the exception's message could not be rendered)"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__

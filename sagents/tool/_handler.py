"""``ToolHandler``: how a tool whose execution lives elsewhere plugs into the ``ToolManager``.

A local function is called by the manager itself. Everything else (the tools of an MCP server,
sagents' built-in tools) registers a ``(ToolSpec, handler)`` pair: the manager validates and
coerces the arguments against ``spec.input_schema``, applies the timeout, and turns exceptions
into error results; the handler only executes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sagents.core._result import ToolResult
from sagents.tool._context import SessionContext

__all__ = ["ToolCall", "ToolHandler"]


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One call, as the handler sees it.

    Attributes:
        tool_name: The registered name (not the exported one).
        session_context: The calling session.
        tool_call_id: The model's id for this call, if any (progress events carry it).
        timeout: The call's timeout in seconds (None: not given); the manager enforces it, and
            a handler may pass it on (for example to an MCP request).
    """

    tool_name: str
    session_context: SessionContext
    tool_call_id: str | None = None
    timeout: float | None = None


class ToolHandler(Protocol):
    """Executes a call of a registered tool.

    Called with arguments already validated against the spec's input schema. Return a
    :class:`ToolResult` (``is_error=True`` for failures the tool reports); raise a
    :class:`~sagents.errors.SagentsError` for failures with a code of their own (for example
    ``upstream_unavailable``); any other exception becomes an ``execution_error`` result.
    Cancellation must propagate.
    """

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        """Execute the call."""
        ...

"""A registered tool as the registry keeps it: its spec, its argument validator and how a call
of it begins (a local function called, or a :class:`~sagents.tool._handler.ToolHandler` given
the :class:`~sagents.tool._handler.ToolCall` it sees), made once at registration from what
``ToolManager.register_tool`` takes; and the timeout a call gets (:func:`call_timeout`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from sagents.core._spec import ToolSpec
from sagents.errors import ToolDefinitionError
from sagents.tool._arguments import ArgumentValidator, ScalarParameters
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall, ToolHandler
from sagents.tool._local_tool import LocalTool, build_local_tool
from sagents.tool.tool_base import get_local_tool

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "Entry",
    "Registrable",
    "Start",
    "call_timeout",
    "handler_call",
    "make_entry",
]

DEFAULT_TOOL_TIMEOUT = 300.0
"""Timeout of one call in seconds when ``run_tool`` gets none (5 minutes)."""


def call_timeout(timeout: float | None, spec: ToolSpec) -> float:
    """The timeout of one call, in seconds: decided here and nowhere else.

    The per-call ``timeout`` if given, else the tool's own setting (``spec.timeout``; for an MCP
    tool its server's ``call_timeout``, ``math.inf`` for none), else
    :data:`DEFAULT_TOOL_TIMEOUT`. Layers below ``run_tool`` receive the result in
    ``ToolCall.timeout`` and apply no default of their own.
    """
    if timeout is not None:
        return timeout
    if spec.timeout is not None:
        return spec.timeout
    return DEFAULT_TOOL_TIMEOUT


Registrable = Callable[..., Any] | LocalTool | tuple[ToolSpec, ToolHandler]
"""What ``ToolManager.register_tool`` takes: a function, a ``LocalTool``, or a
``(ToolSpec, handler)`` pair."""


Start = Callable[[dict[str, Any], SessionContext | None, str | None, str, float], Awaitable[Any]]
"""How a registered tool begins a call: ``(valid arguments, session context, call id, registered
name, timeout)`` -> what to await (the tool's value or its ``ToolResult``)."""


@dataclass(frozen=True, kw_only=True)
class Entry:
    spec: ToolSpec
    validator: ArgumentValidator
    start: Start
    local: LocalTool | None = None
    # Decided once per tool, read on every call:
    scalars: ScalarParameters | None = None  # an async local tool of bare scalar parameters
    function: Callable[..., Awaitable[Any]] | None = None  # that tool's function (scalars)
    wrapped: bool = False  # a local tool's output schema wraps its value (output_wrapped)
    timeout: float = DEFAULT_TOOL_TIMEOUT  # call_timeout(None, spec)


@dataclass(frozen=True)
class _LocalStart:
    """Begins a call of a local function: the arguments bound, the function called.

    An async function's own coroutine is what the call awaits (no frame of ours around it),
    and a session context is made only for a tool that injects one: both are measured by
    ``bench/bench_tool_dispatch.py`` (a trivial tool's call against pydantic-ai's).
    """

    local: LocalTool
    injects: bool  # bool(local.injected), read once

    def __call__(
        self,
        arguments: dict[str, Any],
        context: SessionContext | None,
        tool_call_id: str | None,
        name: str,
        limit: float,
    ) -> Awaitable[Any]:
        local = self.local
        if context is None and self.injects:
            context = SessionContext()
        # the arguments are valid already: bound as they are when pydantic would not change them
        kwargs = local.bind_valid(arguments, context)
        if local.is_async:
            coroutine: Awaitable[Any] = local.func(**kwargs)
            return coroutine
        # A worker thread cannot be interrupted: on timeout or cancellation the call returns
        # at once and the thread is abandoned (it finishes in the background).
        function = functools.partial(local.func, **kwargs)
        return anyio.to_thread.run_sync(function, abandon_on_cancel=True)


@dataclass(frozen=True)
class _HandlerStart:
    """Begins a call of a registered handler, with the :class:`ToolCall` it sees."""

    handler: ToolHandler

    def __call__(
        self,
        arguments: dict[str, Any],
        context: SessionContext | None,
        tool_call_id: str | None,
        name: str,
        limit: float,
    ) -> Awaitable[Any]:
        return self.handler(arguments, handler_call(context, tool_call_id, name, limit))


def handler_call(
    context: SessionContext | None, tool_call_id: str | None, name: str, limit: float
) -> ToolCall:
    """The call as a handler (or a call context) sees it: the request, resolved."""
    return ToolCall(
        tool_name=name,
        session_context=context or SessionContext(),
        tool_call_id=tool_call_id or f"call_{os.urandom(16).hex()}",
        timeout=limit,
    )


def make_entry(tool: Registrable) -> Entry:
    if isinstance(tool, tuple):
        if len(tool) != 2 or not isinstance(tool[0], ToolSpec) or not callable(tool[1]):
            raise ToolDefinitionError("register a (ToolSpec, handler) pair as a 2-tuple")
        spec, handler = tool
        return Entry(
            spec=spec,
            validator=_validator(spec, check=True),
            start=_HandlerStart(handler),
            timeout=call_timeout(None, spec),
        )
    if isinstance(tool, LocalTool):
        local = tool
    elif callable(tool):
        local = get_local_tool(tool) or build_local_tool(tool)
    else:
        raise ToolDefinitionError(
            f"cannot register {type(tool).__name__!r} as a tool",
            hint="Register a function, a LocalTool or a (ToolSpec, handler) pair.",
        )
    kinds = local.scalar_kinds if local.is_async else None
    validator = _validator(local.spec, check=False)  # pydantic made it: valid by construction
    return Entry(
        spec=local.spec,
        validator=validator,
        start=_LocalStart(local, bool(local.injected)),
        local=local,
        scalars=ScalarParameters(kinds, validator) if kinds is not None else None,
        function=local.func if kinds is not None else None,
        wrapped=local.output_wrapped,
        timeout=call_timeout(None, local.spec),
    )


def _validator(spec: ToolSpec, *, check: bool) -> ArgumentValidator:
    try:
        return ArgumentValidator(spec.input_schema, check=check)
    except ToolDefinitionError as error:
        raise ToolDefinitionError(f"tool {spec.name!r}: {error.message}", hint=error.hint) from None

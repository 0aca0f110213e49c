"""``ToolManager``: the registry of tools and the one call path (docs/tools.md;
docs/architecture.md, "One tool call").

One tool call: find the spec (registered or exported name) -> parse, coerce and validate the
arguments (:mod:`sagents.tool._arguments`) -> the handler (a local function through
``LocalTool.invoke``, or a registered :class:`~sagents.tool._handler.ToolHandler`) under a timeout
-> :func:`~sagents.tool._result_conversion.to_tool_result`. ``run_tool`` is the one
exception->result boundary: every failure becomes a ``ToolResult`` with ``is_error=True`` and an
``error`` code; cancellation of the caller always propagates.

``ToolManager()`` holds exactly what it is given. :func:`get_tool_manager` returns the process
default, which also collects every ``@tool`` imported so far
(:meth:`ToolManager.collect_discovered`).

It runs past 800 lines on purpose: over a third is docstrings of ``ToolManager``'s public API
(docs/api.md is made from them), and the call path stays in one class so that its one
exception->result boundary reads in one place.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import logging
import math
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import (
    NotAllowedError,
    ToolDefinitionError,
    ToolManagerClosedError,
    ToolNameConflictError,
    UnknownToolError,
)
from sagents.progress import ProgressHub, bind_tool_call, default_hub
from sagents.progress._binding import BoundToolCall, LazyToolCall, on_asyncio, raw_tool_call
from sagents.tool._arguments import ArgumentValidator, parse_arguments
from sagents.tool._call import CallsTools, ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._deadline import await_within, finish_within, first_step
from sagents.tool._entries import (
    DEFAULT_TOOL_TIMEOUT,
    Entry,
    call_timeout,
    handler_call,
    make_entry,
)
from sagents.tool._entries import (
    Registrable as Registrable,  # what register_tool takes: its annotation's import path
)
from sagents.tool._exports import ToolExports
from sagents.tool._failures import cancellation_requested, error_result, timed_out
from sagents.tool._handler import ToolCall
from sagents.tool._local_tool import LocalTool
from sagents.tool._middleware import Hooked, ToolMiddleware, after_call, before_call
from sagents.tool._result_conversion import to_tool_result
from sagents.tool.tool_base import discovered_tools

if TYPE_CHECKING:
    # Only for annotations: local tools never import the MCP SDK (see _mcp_registry).
    from sagents.mcp import MCPSupervisor, ServerParams, ServerSettings, ServerStatus
    from sagents.mcp._oauth import PrincipalConnections
    from sagents.tool._api_export import ModelApi
    from sagents.tool._mcp_registry import MCPRegistry

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "CallContextFactory",
    "ToolManager",
    "call_timeout",
    "get_tool_manager",
]

logger = logging.getLogger(__name__)


T = TypeVar("T")
CallContextFactory = Callable[[ToolCall], AbstractAsyncContextManager[object]]


class ToolManager(CallsTools):
    """A registry of tools and the call path to run them.

    Use as ``async with ToolManager() as tm: ...`` or call :meth:`aclose` when done: it releases
    the resources the manager owns (:meth:`push_async_callback`, :meth:`enter_async_context`);
    afterwards registrations raise and calls give ``manager_closed`` error results.
    """

    def __init__(
        self,
        *,
        progress_hub: ProgressHub | None = None,
        middleware: Sequence[ToolMiddleware] = (),
    ) -> None:
        """Create an empty registry.

        Args:
            progress_hub: Where :func:`~sagents.progress.emit_tool_progress` calls of the tools
                run here are delivered; the process default hub
                (:func:`sagents.progress.default_hub`) when None.
            middleware: :class:`~sagents.tool.ToolMiddleware` applied to every call run here,
                whoever makes it, in order (docs/tools.md, "Middleware"). The registry asks
                nobody: a middleware's ``ask`` refuses the call here (put middleware that may
                ask on the ``ToolProxy`` that decides the session's calls).
        """
        self._progress_hub = progress_hub
        self._middleware: tuple[ToolMiddleware, ...] = tuple(middleware)
        self._mcp: MCPRegistry | None = None
        self._entries: dict[str, Entry] = {}
        self._exports = ToolExports()
        self._collected: set[int] = set()  # id() of LocalTools taken by collect_discovered
        self._collected_refs: list[LocalTool] = []  # keeps those ids valid
        self._exit_stack = contextlib.AsyncExitStack()
        self._call_contexts: list[CallContextFactory] = []
        self._closed = False
        self._owner_task: int | None = None  # the task that entered the first context
        self._revision = 0  # registrations and removals so far (revision)

    # -- registration -------------------------------------------------------------------------

    def register_tool(self, tool: Registrable, *, replace: bool = False) -> ToolSpec:
        """Register a tool.

        Args:
            tool: A function decorated with ``@tool``; a plain function (its signature and
                docstring make the spec); a ``LocalTool``; or a ``(ToolSpec, handler)`` pair
                for a tool executed elsewhere (MCP, built-ins; see :class:`ToolHandler`).
            replace: Replace a tool already registered under the same name. Without it, a
                collision is an error: nothing is ever shadowed silently.

        Returns:
            The registered tool's spec.

        Raises:
            ToolNameConflictError: the name is taken and ``replace`` is false.
            ToolDefinitionError: ``tool`` is none of the above, or its schema is invalid.
            ToolManagerClosedError: after :meth:`aclose`.
        """
        self._check_open()
        entry = make_entry(tool)
        name = entry.spec.name
        if not name:
            raise ToolDefinitionError("a tool needs a non-empty name")
        if name in self._entries and not replace:
            raise ToolNameConflictError(
                f"a tool named {name!r} is already registered",
                hint="Pick another name, unregister the old tool, or pass replace=True.",
                details={"name": name},
            )
        self._exports.claim(name)
        self._entries[name] = entry
        self._revision += 1
        return entry.spec

    def unregister_tool(self, name: str) -> ToolSpec:
        """Remove a tool by its registered name and return its spec.

        Raises:
            UnknownToolError: when no tool has that name.
        """
        entry = self._entries.pop(name, None)
        if entry is None:
            raise self._unknown(name)
        self._exports.release(name)
        self._revision += 1
        return entry.spec

    def collect_discovered(self) -> list[str]:
        """Register every ``@tool`` imported so far that this manager has not collected yet.

        A discovered tool whose name is already taken by another tool here is not registered:
        the conflict is logged as an error naming the tool, and the first tool keeps the name
        (register explicitly with ``replace=True`` to choose the other one). A discovered tool
        whose schema cannot be built (an annotation naming something not defined yet) is
        logged as an error and tried again at the next collection. So that one bad tool in some
        imported module cannot make the process default unusable, this step never raises.

        Returns:
            The names registered by this call.
        """
        added = []
        for local in discovered_tools():
            if id(local) in self._collected:
                continue
            try:
                self.register_tool(local)
            except ToolDefinitionError as error:
                # Not marked as collected: a name defined later in its module may resolve at
                # the next collection. One broken tool never makes the others unavailable.
                logger.error(
                    "discovered tool %r (%s) was not collected (will retry): %s",
                    local.name,
                    getattr(local.func, "__module__", "?"),
                    error.message,
                )
                continue
            except ToolNameConflictError as error:
                self._collected.add(id(local))
                self._collected_refs.append(local)
                logger.error(
                    "discovered tool %r (%s) was not collected: %s",
                    local.spec.name,
                    getattr(local.func, "__module__", "?"),
                    error.message,
                )
                continue
            self._collected.add(id(local))
            self._collected_refs.append(local)
            added.append(local.spec.name)
        return added

    # -- lookup and export --------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """A number that changes whenever a tool is registered or removed: while it stays the
        same, so do this registry's specs and exports (what a caller may keep, as the agent
        loop keeps a run's offer of tools between its model calls)."""
        return self._revision

    def has_tool(self, name: str) -> bool:
        """True when ``name`` is a registered or an exported name here."""
        return name in self._entries or name in self._exports.registered

    def list_all_tools_name(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def list_specs(self) -> list[ToolSpec]:
        """The specs of every tool, sorted by registered name."""
        return [self._entries[name].spec for name in sorted(self._entries)]

    def get_tool_spec(self, name: str) -> ToolSpec:
        """The spec of a tool, by registered or exported name.

        Raises:
            UnknownToolError: when there is no such tool.
        """
        return self._find(name).spec

    def resolve_exported_name(self, name: str) -> str:
        """The registered name behind an exported (or registered) name.

        Raises:
            UnknownToolError: when no tool has that name.
        """
        return self._find(name).spec.name

    def get_openai_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """Every tool as an OpenAI Chat Completions function tool, sorted by registered name.

        The sort gives a stable prefix for prompt caching; ``function.name`` is the exported
        name (``^[a-zA-Z0-9_-]{1,64}$``, see :mod:`sagents.tool.naming`). Exports are cached
        per tool; each call returns fresh objects the caller may modify.

        One tool's schema never takes the others down: a tool that strict mode cannot express
        is exported in the faithful mode (without ``"strict": true``), and a tool that cannot
        be exported at all is left out; both are logged as warnings.

        Args:
            strict: OpenAI's strict mode (see :mod:`sagents.tool.openai_export`). Pass
                ``strict=True`` to :meth:`run_tool` for calls the model makes with it.
        """
        return self._exports.openai_tools(self._specs(), strict)

    def get_responses_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """Every tool as an OpenAI Responses function tool, sorted by registered name.

        The flat shape ``{"type": "function", "name", "description", "parameters",
        "strict"}`` (:mod:`sagents.tool.export_responses`), with the same names, schemas and
        fallback as :meth:`get_openai_tools`. Read the model's ``function_call`` items with
        :func:`~sagents.tool.export_responses.parse_responses_function_call`.

        Args:
            strict: OpenAI's strict mode; pass ``strict=True`` to :meth:`run_tool` too.
        """
        return self._api_tools("responses", strict)

    def get_anthropic_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """Every tool as an Anthropic Messages tool, sorted by registered name.

        ``{"name", "description", "input_schema"[, "strict"]}``
        (:mod:`sagents.tool.export_anthropic`); a tool that strict mode cannot express is
        exported faithfully, one that cannot be exported is left out, both with a warning.
        Read the model's ``tool_use`` blocks with
        :func:`~sagents.tool.export_anthropic.parse_anthropic_tool_use`.

        Args:
            strict: Anthropic's strict tool use (optional properties stay optional, so
                :meth:`run_tool` needs no ``strict=True``).
        """
        return self._api_tools("anthropic", strict)

    def get_gemini_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """Every tool as a Gemini function declaration, sorted by registered name.

        ``{"name", "description"[, "parameters"]}`` in Gemini's OpenAPI subset
        (:mod:`sagents.tool.export_gemini`); send them as ``{"functionDeclarations": [...]}``.
        A tool Gemini cannot declare without changing its meaning is left out with a warning.
        Read the model's ``functionCall`` parts with
        :func:`~sagents.tool.export_gemini.parse_gemini_function_call`, passing this manager.

        Args:
            strict: Declare the strict form (optional properties required and nullable); pass
                ``strict=True`` to :meth:`run_tool` too.
        """
        return self._api_tools("gemini", strict)

    def _api_tools(self, api: ModelApi, strict: bool) -> list[dict[str, Any]]:
        return self._exports.api_tools(api, self._specs(), strict)

    def _specs(self) -> dict[str, ToolSpec]:
        return {name: entry.spec for name, entry in self._entries.items()}

    # -- calls --------------------------------------------------------------------------------

    async def call(self, request: ToolRequest) -> ToolResult:
        """Run one call (see :meth:`run_tool`, which takes the request's values: the registry
        is where the request ends, resolved into the :class:`~sagents.tool.ToolCall` a handler
        sees)."""
        return await self.run_tool(
            request.name,
            request.arguments,
            request.session_context,
            tool_call_id=request.tool_call_id,
            timeout=request.timeout,
            strict=request.strict,
        )

    async def run_tool(
        self,
        name: str,
        args: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the seed API's per-call timeout
        strict: bool = False,
    ) -> ToolResult:
        """Run one tool call; never raises for a failure of the call (docs/architecture.md,
        "Where errors become results").

        :meth:`call` with a :class:`~sagents.tool.ToolRequest` of these values, written over
        the values themselves: the registry is the end of the chain, and a direct call that
        built a request only to take it apart would cost a third of a trivial tool's call
        (``bench/bench_tool_dispatch.py``, against pydantic-ai's ``FunctionToolset``).

        Args:
            name: The registered or the exported name.
            args: The arguments: a mapping, a JSON text of an object, or None.
            session_context: The calling session; a fresh default ``SessionContext`` if None.
                Its decision (if any) was made in front of the registry: nothing here decides.
            tool_call_id: The model's id of this call (handed to the handler, and the id of
                its progress events); a fresh ``call_<hex>`` id when None, drawn only if
                something needs one.
            timeout: Seconds before the call gives a ``timeout`` error result; if None, the
                tool's own ``ToolSpec.timeout`` (an MCP tool: its server's ``call_timeout``),
                else :data:`DEFAULT_TOOL_TIMEOUT` (see :func:`call_timeout`). A sync tool's
                worker thread cannot be stopped: it is abandoned and finishes in the
                background.
            strict: The model saw the strict export: ``null`` for an optional parameter means
                "absent" (see :mod:`sagents.tool._arguments`).

        Returns:
            The tool's result, or an error result whose ``error.code`` is one of
            ``unknown_tool``, ``invalid_arguments``, ``timeout``, ``execution_error``,
            ``unserializable_result``, ``manager_closed``, or a handler's own code.

        Raises:
            ValueError: for a ``timeout`` that is not a positive number (a programming error).
            The caller's cancellation exception: cancellation is never turned into a result.
        """
        if timeout is not None and (math.isnan(timeout) or timeout <= 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        registered = name
        limit = DEFAULT_TOOL_TIMEOUT if timeout is None else timeout
        hooked: Hooked | None = None  # what the middleware made of the call, if any
        try:
            if self._closed:
                self._check_open()
            entry = self._entries.get(name) or self._find(name)
            registered = entry.spec.name
            limit = entry.timeout if timeout is None else timeout  # = call_timeout(timeout, spec)
            if self._middleware:
                hooked = await self._before(registered, args, session_context, tool_call_id)
                if hooked.response is not None:  # a middleware answered: the tool does not run
                    return await after_call(hooked.seen, hooked.call, hooked.response)
                args = hooked.call.arguments
            scalars = entry.scalars
            as_is = (
                scalars is not None and type(args) is dict and not strict and scalars.accepts(args)
            )
            if as_is:
                # Bare scalars of exactly their parameters' types, within the size bound, and
                # accepted by the compiled schema check: valid as they are, and the keyword
                # arguments as they are (measured by bench/bench_tool_dispatch.py; the function
                # gets its own dict from the call).
                arguments: dict[str, Any] = args  # type: ignore[assignment]
            else:
                parsed = parse_arguments(registered, args)
                if entry.validator.costly(parsed):
                    arguments = await _validate_in_worker(
                        entry.validator, registered, parsed, strict=strict, limit=limit
                    )
                else:
                    arguments = entry.validator.validate(
                        registered, parsed, strict=strict, owned=True
                    )
            hub = self._progress_hub if self._progress_hub is not None else default_hub()
            context = session_context
            session_id = None if context is None else context.session_id
            listened = session_id is not None and hub.listening(session_id)
            if self._call_contexts or (listened and not on_asyncio()):
                # coalesced progress on trio needs a task group beside the call
                call = handler_call(context, tool_call_id, registered, limit)
                async with self._bound(hub, call, context):
                    begun: Awaitable[Any] = entry.start(
                        arguments, context, tool_call_id, registered, limit
                    )
                    finished, result = await await_within(begun, limit)
            else:
                # Progress bound without a context manager's calls (docs/progress.md):
                # coalesced for a session someone listens to (an agent's run, each call:
                # bench/bench_agent_loop.py); else lazily, a context variable, and nothing at
                # all for a call nobody can listen to (no session, no id, no outer call). The
                # timer is armed only once the tool waits (sagents.tool._deadline): a trivial
                # tool's whole call, measured by bench/bench_tool_dispatch.py.
                bound = lazy = token = None
                if listened:
                    assert session_id is not None
                    call_id = tool_call_id or f"call_{os.urandom(16).hex()}"
                    bound = BoundToolCall(hub, session_id, call_id, session_context=context)
                    bound.bind()
                elif session_id is not None or tool_call_id or raw_tool_call() is not None:
                    lazy = LazyToolCall(hub, session_id, tool_call_id or None, context)
                    token = lazy.bind()
                try:
                    function = entry.function
                    if as_is and function is not None:
                        begun = function(**arguments)
                    else:
                        begun = entry.start(arguments, context, tool_call_id, registered, limit)
                    finished, result = first_step(begun)
                    if not finished:
                        finished, result = await finish_within(begun, result, limit)
                finally:
                    if lazy is not None and token is not None:
                        lazy.unbind(token)
                    elif bound is not None:
                        await bound.unbind()
            if not finished:
                raise timed_out(registered, limit)
            outcome = to_tool_result(result, tool_name=registered, wrap_result=entry.wrapped)
        except anyio.get_cancelled_exc_class() as error:
            if cancellation_requested():
                raise  # the caller (or an enclosing scope) is being cancelled: propagate
            outcome = error_result(error, registered)
        except (Exception, SystemExit) as error:  # noqa: BLE001 - the one exception->result boundary
            outcome = error_result(error, registered)
        if hooked is not None:
            outcome = await after_call(hooked.seen, hooked.call, outcome)
        return outcome

    async def _before(
        self,
        registered: str,
        args: Mapping[str, Any] | str | None,
        session_context: SessionContext | None,
        tool_call_id: str | None,
    ) -> Hooked:
        """The call after this registry's middleware (the arguments parsed, maybe rewritten,
        maybe answered); raise when one refused it or asked (nobody can be asked here)."""
        request = ToolRequest(
            registered,
            parse_arguments(registered, args),
            session_context,
            tool_call_id=tool_call_id,
        )
        hooked = await before_call(self._middleware, request)
        if hooked.asked is not None:
            raise NotAllowedError(
                f"{hooked.asked}; a ToolManager asks nobody, so the call of {registered!r}"
                " is refused",
                hint="Put middleware that may ask on the ToolProxy that decides the calls.",
                details={"name": registered},
            )
        return hooked

    @contextlib.asynccontextmanager
    async def _bound(
        self, hub: ProgressHub, call: ToolCall, context: SessionContext | None
    ) -> AsyncIterator[None]:
        session_id, progress_id = call.session_context.session_id, call.tool_call_id or ""
        async with contextlib.AsyncExitStack() as around:
            if hub.listening(session_id):
                await around.enter_async_context(
                    bind_tool_call(hub, session_id, progress_id, session_context=context)
                )
            else:
                around.enter_context(LazyToolCall(hub, session_id, progress_id, context))
            for factory in self._call_contexts:
                await around.enter_async_context(factory(call))
            yield

    # -- MCP servers --------------------------------------------------------------------------

    async def register_mcp_server(
        self,
        name: str,
        params: ServerParams,
        settings: ServerSettings | None = None,
        *,
        wait: bool = True,
    ) -> list[str]:
        """Connect to an MCP server and register its tools as ``<name>__<tool>``.

        The connection is long-lived, supervised (restarts with backoff) and shared by every
        session; it is closed by :meth:`aclose` (or ``async with``), or when the process ends.

        Args:
            name: The server's name: letters, digits, ``-`` and single ``_`` (no ``__``).
            params: ``mcp.StdioServerParameters``, ``SseServerParameters``,
                ``StreamableHttpServerParameters`` (``sagents.tool.tool_schema``), or an
                in-process ``MCPServer`` / low-level ``Server``.
            settings: Timeouts (seconds), concurrency, permission classes; defaults when None.
            wait: Wait for the first connection and listing (bounded by the connect and list
                timeouts). With False, returns ``[]`` at once and the tools are registered
                when the server is ready.

        Returns:
            The registered tool names.

        Raises:
            ToolDefinitionError: the server name would make tool names ambiguous.
            ToolNameConflictError: a server of that name, or a tool of one of its names, is
                already registered (nothing of the server is kept).
            UpstreamUnavailableError: with ``wait``, the server could not be started.
            ToolManagerClosedError: after :meth:`aclose`.
        """
        self._check_open()
        return await self._mcp_registry().register(name, params, settings, wait=wait)

    def route_mcp_server(self, name: str, route: PrincipalConnections) -> None:
        """Send the calls of MCP server ``name`` (registered after this) to the calling
        principal's own connection of ``route`` instead of the shared one (an ``"auth":
        "oauth"`` server, docs/oauth.md); ``route`` is closed with the manager."""
        self._check_open()
        self._mcp_registry().routes[name] = route
        self.push_async_callback(route.aclose)

    async def collect_discovered_mcp_servers(self, *, wait: bool = True) -> dict[str, ServerStatus]:
        """Connect the MCP servers declared with ``mcp_server(...)`` that this manager has not
        collected yet (:mod:`sagents.tool.mcp_tool_base`), side by side.

        As :meth:`register_mcp_servers`: a server that cannot start stays registered as
        ``failed`` and does not raise.

        Returns:
            The status of each server collected by this call.
        """
        from sagents.tool.mcp_tool_base import _not_collected

        pending = _not_collected(self._collected)
        if not pending:
            return {}
        return await self.register_mcp_servers(pending, wait=wait)

    async def register_mcp_servers(
        self, servers: Mapping[str, tuple[ServerParams, ServerSettings]], *, wait: bool = True
    ) -> dict[str, ServerStatus]:
        """Connect to several MCP servers side by side and register the tools of each.

        Unlike :meth:`register_mcp_server`, a server that cannot start does not raise: it stays
        registered with state ``failed`` and its ``last_error`` (see :meth:`mcp_server_status`),
        and a slow server delays nobody but itself. A tool whose name is already taken is
        skipped with a warning.

        Args:
            servers: ``{name: (params, settings)}``, e.g. ``SagentsConfig.as_supervisor_input()``.
            wait: False returns at once (every status ``connecting``); each server's tools are
                registered as it becomes ready, and :meth:`on_mcp_tools_changed` listeners are
                told. A server that fails is retried in the background with backoff.

        Returns:
            Each server's status after its first start attempt.

        Raises:
            ToolDefinitionError: a server name would make tool names ambiguous.
            ToolNameConflictError: a server of that name is already registered.
            ToolManagerClosedError: after :meth:`aclose`.
        """
        self._check_open()
        return await self._mcp_registry().register_many(servers, wait=wait)

    async def unregister_mcp_server(self, name: str, *, drain_s: float = 0.0) -> list[str]:
        """Close an MCP server's connection and remove its tools; returns the removed names.

        Its tools are removed at once; ``drain_s`` gives the calls already running on it that
        many seconds to finish before the connection closes (0: closed at once).

        Raises:
            UnknownToolError: no MCP server of that name is registered.
        """
        if self._mcp is None:
            raise UnknownToolError(f"no MCP server named {name!r} is registered")
        return await self._mcp.unregister(name, drain_s=drain_s)

    async def wait_mcp_servers(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bound
        """Wait until every registered MCP server's first start attempt ended (ready or
        failed), at most ``timeout`` seconds.

        Returns:
            True when every server's first attempt ended in time (also with no servers).
        """
        return True if self._mcp is None else await self._mcp.supervisor.wait_started(timeout)

    def mcp_server_status(self, name: str) -> ServerStatus:
        """An MCP server's state (connecting, ready, failed, restarting), last error and
        withheld tools.

        Raises:
            KeyError: no MCP server of that name is registered.
        """
        if self._mcp is None:
            raise KeyError(name)
        return self._mcp.status(name)

    def mcp_server_statuses(self) -> list[ServerStatus]:
        """The status of every registered MCP server."""
        return [] if self._mcp is None else self._mcp.statuses()

    @property
    def mcp_supervisor(self) -> MCPSupervisor | None:
        """The supervisor of this manager's MCP servers (their prompts, resources and
        completion, docs/mcp.md), or None while no server was registered."""
        return None if self._mcp is None else self._mcp.supervisor

    def on_mcp_tools_changed(self, listener: Callable[[str, list[str]], Awaitable[None]]) -> None:
        """Await ``listener(server, tool_names)`` after a server's changed tool list
        (``notifications/tools/list_changed``) was applied to the registry.

        The gateway uses it to tell its own clients that the tool list changed.
        """
        self._mcp_registry().listeners.append(listener)

    def _mcp_registry(self) -> MCPRegistry:
        if self._mcp is None:
            # Imported here: the MCP SDK costs about a second of start-up, which a manager
            # of local tools never pays.
            from sagents.tool._mcp_registry import MCPRegistry

            self._mcp = MCPRegistry(self)
            self.push_async_callback(self._mcp.supervisor.aclose)
        return self._mcp

    def add_call_context(self, factory: CallContextFactory) -> None:
        """Run every later call inside ``factory(call)``, an async context manager.

        The seam for cross-cutting work around each call, such as binding progress events to
        the call's ``tool_call_id`` (``lambda call: bind_tool_call(hub, ...)``). Contexts are
        entered in the order added, after the arguments are validated, and exited after the
        handler returns, fails or times out (the timeout applies to the handler only).
        Cancellation of the caller passes through them.
        """
        self._call_contexts.append(factory)

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def progress_hub(self) -> ProgressHub:
        """The hub that receives the progress events of this manager's tool calls."""
        return self._progress_hub if self._progress_hub is not None else default_hub()

    @property
    def closed(self) -> bool:
        """True after :meth:`aclose`."""
        return self._closed

    def push_async_callback(self, callback: Callable[[], Awaitable[object]]) -> None:
        """Have :meth:`aclose` await ``callback()`` (last pushed, first called), shielded.

        Raises:
            ToolManagerClosedError: after :meth:`aclose`.
        """
        self._check_open()

        async def shielded() -> None:
            with anyio.CancelScope(shield=True):
                await callback()

        self._exit_stack.push_async_callback(shielded)

    async def enter_async_context(self, manager: AbstractAsyncContextManager[T]) -> T:
        """Enter an async context manager now and exit it in :meth:`aclose`.

        Used by the MCP layer for its supervisor. Returns what ``__aenter__`` returned.

        Every context must be entered in one task, the one that later calls :meth:`aclose`
        (or leaves ``async with``): a context holding a task group or cancel scope cannot be
        exited from another task (anyio: "cancel scope in a different task").

        Raises:
            ToolManagerClosedError: after :meth:`aclose`.
            RuntimeError: when called from another task than the first context's.
        """
        self._check_open()
        self._check_owner_task("enter_async_context()")
        entered = await self._exit_stack.enter_async_context(manager)
        if self._owner_task is None:
            self._owner_task = anyio.get_current_task().id
        return entered

    async def aclose(self) -> None:
        """Release every owned resource, in reverse order; idempotent.

        Callbacks (:meth:`push_async_callback`) run shielded from cancellation, so that a
        cancelled caller still releases them. Entered contexts are exited as they are: one that
        holds a task group or cancel scope cannot be exited inside a new (shielding) scope, and
        anyio's task groups finish their own cleanup under cancellation.

        Raises:
            RuntimeError: when contexts were entered (:meth:`enter_async_context`) in another
                task; nothing is released then, and the manager stays open, so that the owner
                task can still close it.
        """
        if self._closed:
            return
        self._check_owner_task("aclose()")
        self._closed = True
        await self._exit_stack.aclose()

    async def __aenter__(self) -> ToolManager:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- internals ----------------------------------------------------------------------------

    def _check_owner_task(self, what: str) -> None:
        if self._owner_task is None or self._owner_task == anyio.get_current_task().id:
            return
        raise RuntimeError(
            f"{what} must run in the task that entered this ToolManager's first context "
            "(enter_async_context): the contexts it holds cannot be exited from another task"
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ToolManagerClosedError(
                "this ToolManager is closed", hint="Create a new ToolManager."
            )

    def _find(self, name: str) -> Entry:
        entry = self._entries.get(name)
        if entry is None:
            registered = self._exports.registered.get(name)
            entry = self._entries.get(registered) if registered is not None else None
        if entry is None:
            raise self._unknown(name)
        return entry

    def _unknown(self, name: str) -> UnknownToolError:
        close = difflib.get_close_matches(name, list(self._entries), n=3)
        hint = (
            f"Did you mean {', '.join(repr(c) for c in close)}?"
            if close
            else "Call one of the tools you were given."
        )
        return UnknownToolError(f"no tool named {name!r}", hint=hint, details={"name": name})


async def _validate_in_worker(
    validator: ArgumentValidator,
    tool_name: str,
    parsed: dict[str, Any],
    *,
    strict: bool,
    limit: float,
) -> dict[str, Any]:
    """Validate arguments whose schema patterns cost too much for the event loop (see
    :meth:`ArgumentValidator.costly`) in a worker thread, within the call's time limit."""
    check = functools.partial(
        validator.validate, tool_name, parsed, strict=strict, owned=True, in_worker=True
    )
    with anyio.move_on_after(limit):
        return await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
    raise timed_out(tool_name, limit)


_default_manager: ToolManager | None = None  # the documented process default
_default_lock = threading.Lock()  # get_tool_manager() may be called from several threads


def get_tool_manager() -> ToolManager:
    """The process-default ``ToolManager``, with every ``@tool`` imported so far collected.

    Each call collects tools imported since the previous call (docs/tools.md: a module's
    tools are available once it is imported). A closed default is replaced by a new one.
    Thread-safe: threads calling at once get the same manager, and each tool is collected once.
    A discovered tool that cannot be collected is logged, not raised (see
    :meth:`ToolManager.collect_discovered`).
    """
    global _default_manager
    with _default_lock:
        if _default_manager is None or _default_manager.closed:
            _default_manager = ToolManager()
        _default_manager.collect_discovered()
        return _default_manager

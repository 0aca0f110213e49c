"""``MCPSupervisor``: owns every upstream MCP connection of a process (docs/mcp.md).

One long-lived session per server, shared by every caller; each lives in its own worker task in
the supervisor's task group (see :mod:`sagents.mcp._connection`). The supervisor is an async
context manager, and also works without one (a bare ``await tm.register_mcp_server(...)``,
docs/architecture.md, "Lifecycles"): then its task group lives in a host task of its own, ended
by :meth:`MCPSupervisor.aclose` or, at the latest, when the event loop shuts down; an ``atexit``
hook kills any stdio server still running when the interpreter exits.

:meth:`MCPSupervisor.call_tool` is the one exception→result boundary of an upstream call: it
never raises for a failure of the call (typed errors from :mod:`sagents.errors` become error
results with their codes); only cancellation of the caller propagates, after
``notifications/cancelled`` went upstream.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    REQUEST_TIMEOUT,
)
from pydantic import ValidationError

from sagents.core._lifespan import Lifespan
from sagents.core._result import ToolResult
from sagents.core._secrets import Redactor
from sagents.core._spec import ToolSpec
from sagents.errors import (
    InvalidArgumentsError,
    SagentsError,
    ToolDefinitionError,
    ToolNameConflictError,
    ToolTimeoutError,
    UnknownToolError,
    UpstreamProtocolError,
    UpstreamUnavailableError,
)
from sagents.mcp._catalog import CatalogChangedCallback, CatalogKind, ServerCatalog
from sagents.mcp._connection import ServerConnection, ToolsChangedCallback
from sagents.mcp._convert import check_server_name, convert_result
from sagents.mcp._ext_types import (
    ReadResourceDirectoryRequest,
    ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult,
)
from sagents.mcp._params import ServerParams, StreamableHttpServerParameters
from sagents.mcp._requests import TRANSPORT_ERRORS, request_on
from sagents.mcp._resource_subscriptions import ResourceUpdatedCallback, supports_subscribe
from sagents.mcp._session import track_send
from sagents.mcp._settings import ServerSettings
from sagents.mcp._status import ServerStatus
from sagents.mcp._tasks_client import resolve_claimed

__all__ = ["MCPSupervisor", "default_log_dir"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R", bound=types.Result)


def default_log_dir() -> Path:
    """Where stdio servers' stderr logs go by default (``<server>.log`` in it).

    ``$SAGENTS_DATA_DIR/logs/mcp`` when ``SAGENTS_DATA_DIR`` is set (the directory of the audit
    store and run records), else ``$XDG_STATE_HOME/sagents/mcp``, else
    ``~/.local/state/sagents/mcp`` (XDG Base Directory Specification, "state" data).
    """
    data = os.environ.get("SAGENTS_DATA_DIR")
    if data:
        return Path(data).expanduser().absolute() / "logs" / "mcp"
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sagents" / "mcp"


class MCPSupervisor(Lifespan):
    """Owns the upstream MCP servers of a process: connections, restarts, calls, statuses.

    Args:
        log_dir: Where stdio servers' stderr goes (``<log_dir>/<server>.log``); a server's
            ``ServerSettings.log_dir`` wins. Default: :func:`default_log_dir`.
        on_tools_changed: Awaited with ``(server, specs)`` whenever a listing changes a
            server's tools: the first listing, ``notifications/tools/list_changed``, or a
            restart that lists other tools; so that a registry can refresh.

    Use ``async with MCPSupervisor() as sup:``, or call methods directly and end with
    ``await sup.aclose()`` (asyncio only in that case).
    """

    def __init__(
        self, *, log_dir: Path | None = None, on_tools_changed: ToolsChangedCallback | None = None
    ) -> None:
        self._log_dir = log_dir
        self._on_tools_changed = on_tools_changed
        self._connections: dict[str, ServerConnection] = {}
        self._catalog_listeners: list[CatalogChangedCallback] = []
        self._announce_listeners: list[CatalogChangedCallback] = []
        self._update_listeners: list[ResourceUpdatedCallback] = []
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._host_stop: anyio.Event | None = None
        self._host_done: anyio.Event | None = None
        self._host_task: Any = None

    # ---- lifecycle --------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        """Run the connections' tasks in one task group; on leaving, close every connection
        (shielded), then cancel what still runs."""
        if self._tg is not None or self._closed:
            raise RuntimeError("an MCPSupervisor can be entered once, before any other use")
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                try:
                    with anyio.CancelScope(shield=True):
                        await self._close_all()
                finally:
                    tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Close every connection (stdio servers' process groups end); idempotent.

        Safe from any task. Without ``async with``, this also ends the host task.
        """
        with anyio.CancelScope(shield=True):
            await self._close_all()
            if self._host_stop is not None and self._host_done is not None:
                self._host_stop.set()
                await self._host_done.wait()

    async def _close_all(self) -> None:
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        async with anyio.create_task_group() as tg:
            for connection in connections:
                tg.start_soon(connection.close)

    async def _task_group(self) -> anyio.abc.TaskGroup:
        if self._closed:
            raise RuntimeError("this MCPSupervisor is closed")
        if self._tg is None:
            await self._start_host()
        assert self._tg is not None
        return self._tg

    async def _start_host(self) -> None:
        # anyio has no API for a task outside every task group, and the seed's usage without
        # `async with` needs one: the host task owns the task group, entered and exited in it.
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "without an asyncio event loop, use `async with MCPSupervisor()`"
            ) from None
        started, stop, done = anyio.Event(), anyio.Event(), anyio.Event()
        self._host_stop, self._host_done = stop, done

        async def host() -> None:
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    started.set()
                    await stop.wait()
                    tg.cancel_scope.cancel()
            finally:
                done.set()

        self._host_task = loop.create_task(host())
        await started.wait()

    # ---- servers ----------------------------------------------------------------------------

    async def add_server(
        self,
        name: str,
        params: ServerParams,
        settings: ServerSettings | None = None,
        *,
        wait: bool = True,
    ) -> list[ToolSpec]:
        """Connect to a server and list its tools.

        Args:
            name: The server's name; its tools are registered as ``<name>__<tool>``.
            params: :class:`mcp.StdioServerParameters`, :class:`SseServerParameters`,
                :class:`StreamableHttpServerParameters`, or an in-process ``MCPServer`` /
                low-level ``Server``.
            settings: Timeouts, concurrency, permission overrides; defaults when None.
            wait: True waits for the first start (bounded by the connect and list timeouts)
                and returns the specs; False returns ``[]`` at once, and the server's status
                and ``on_tools_changed`` tell the rest (a slow server then blocks nobody).

        Returns:
            The specs of the tools offered (withheld tools are in :meth:`status`).

        Raises:
            ToolDefinitionError: the name would make tool names ambiguous.
            ToolNameConflictError: a server of that name is already registered.
            UpstreamUnavailableError: with ``wait``, the server could not be started; it is
                not kept.
        """
        try:
            check_server_name(name)
        except ValueError as error:
            raise ToolDefinitionError(str(error)) from None
        if name in self._connections:
            raise ToolNameConflictError(f"MCP server {name!r} is already registered")
        settings = settings or ServerSettings()
        log_dir = settings.log_dir or self._log_dir or default_log_dir()
        connection = ServerConnection(
            name,
            params,
            settings,
            log_path=log_dir / f"{name}.log",
            on_tools_changed=self._on_tools_changed,
            on_catalog_changed=self._catalog_changed,
            on_catalog_announced=self._catalog_announced,
            on_resource_updated=self._resource_updated,
        )
        self._connections[name] = connection
        try:
            tg = await self._task_group()
            await tg.start(connection.run)
        except BaseException:
            self._connections.pop(name, None)
            raise
        if not wait:
            return []
        if await connection.wait_started() != "ready":
            last_error = connection.status().last_error
            await self.remove_server(name)
            raise UpstreamUnavailableError(
                f"MCP server {name!r} could not be started: {last_error}",
                hint=f"see its log {str(connection.log_path)!r}",
                details={"server": name, "log": str(connection.log_path)},
            )
        return list(connection.specs)

    async def add_servers(
        self, servers: dict[str, tuple[ServerParams, ServerSettings]], *, wait: bool = True
    ) -> dict[str, ServerStatus]:
        """Start several servers at once, side by side.

        A server that fails stays registered with status ``failed`` and is retried in the
        background with backoff (and by the next call); one slow server delays only itself.

        Args:
            servers: ``{name: (params, settings)}``.
            wait: True waits for each server's first start attempt; False returns at once
                (statuses ``connecting``), and ``on_tools_changed`` reports each server's tools
                as it becomes ready.

        Returns:
            Each server's status after its first start attempt (``wait``), or now.

        Raises:
            ToolDefinitionError, ToolNameConflictError: as :meth:`add_server`, before any
                server starts.
        """
        for name in servers:
            try:
                check_server_name(name)
            except ValueError as bad_name:
                raise ToolDefinitionError(str(bad_name)) from None
            if name in self._connections:
                raise ToolNameConflictError(f"MCP server {name!r} is already registered")
        for name, (params, settings) in servers.items():
            await self.add_server(name, params, settings, wait=False)
        if not wait:
            return {name: self._connections[name].status() for name in servers}
        async with anyio.create_task_group() as tg:
            for name in servers:
                tg.start_soon(self._connections[name].wait_started)
        return {name: self._connections[name].status() for name in servers}

    async def wait_started(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bound, not a call
        """Wait until every server's first start attempt ended (ready or failed), at most
        ``timeout`` seconds; True when all did."""
        pending = [c for c in self._connections.values() if not c.first_start_done]
        if not pending:
            return True  # the common case, on every call once the servers started: no tasks
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as tg:
                for connection in pending:
                    tg.start_soon(connection.wait_first_start)
            return True
        return False

    async def remove_server(self, name: str, *, drain_s: float = 0.0) -> None:
        """Close a server's connection (its process group ends) and forget it; no-op if unknown.

        Args:
            name: The server.
            drain_s: Seconds the calls in flight on it get to finish before it is closed (no
                new call reaches it meanwhile: it is forgotten first); 0 closes at once.
        """
        connection = self._connections.pop(name, None)
        if connection is not None:
            if drain_s > 0 and not await connection.drain(drain_s):
                logger.warning(
                    "MCP server %r: calls still running after %.0f s are ended", name, drain_s
                )
            with anyio.CancelScope(shield=True):
                await connection.close()

    @property
    def server_names(self) -> list[str]:
        """Registered server names, in registration order."""
        return list(self._connections)

    def status(self, name: str) -> ServerStatus:
        """The status of one server.

        Raises:
            KeyError: no server of that name.
        """
        try:
            return self._connections[name].status()
        except KeyError:
            raise KeyError(f"no MCP server {name!r}") from None

    def statuses(self) -> list[ServerStatus]:
        """Every server's status, in registration order."""
        return [c.status() for c in self._connections.values()]

    def tools(self, server: str | None = None) -> list[ToolSpec]:
        """Specs of the offered tools of one server, or of all servers."""
        if server is not None:
            return list(self._connections[server].specs) if server in self._connections else []
        return [spec for c in self._connections.values() for spec in c.specs]

    async def review_definitions(self, server: str) -> None:
        """Check ``server``'s last listing against its pinned definitions again (an operator
        accepted a change), and publish its tools if that changed them; no-op if unknown."""
        connection = self._connections.get(server)
        if connection is not None:
            await connection.review_definitions()

    # ---- prompts, resources, completion ----------------------------------------------------

    def on_catalog_changed(self, listener: CatalogChangedCallback) -> None:
        """Await ``listener(server, kind)`` whenever a server's prompts (``kind="prompts"``)
        or resources and templates (``"resources"``) change as a client sees them: a new
        listing that differs, the server becoming ready, or its loss hiding its items."""
        self._catalog_listeners.append(listener)

    def on_catalog_announced(self, listener: CatalogChangedCallback) -> None:
        """Await ``listener(server, kind)`` each time a server announces that its prompts or
        resources changed (``notifications/.../list_changed``), once they were listed again,
        even when the new list reads the same (a resource's content may be what changed: the
        skills of an MCP server are resources)."""
        self._announce_listeners.append(listener)

    async def _catalog_announced(self, server: str, kind: CatalogKind) -> None:
        for listener in list(self._announce_listeners):
            await listener(server, kind)

    async def _catalog_changed(self, server: str, kind: CatalogKind) -> None:
        for listener in list(self._catalog_listeners):
            await listener(server, kind)

    # ---- resource subscriptions -------------------------------------------------------------

    def on_resource_updated(self, listener: ResourceUpdatedCallback) -> None:
        """Await ``listener(server, uri)`` for each update of a subscribed resource (``uri``
        as the server spells it; coalesced, and only for URIs subscribed to, or their
        sub-resources)."""
        if listener not in self._update_listeners:
            self._update_listeners.append(listener)

    async def _resource_updated(self, server: str, uri: str) -> None:
        for listener in list(self._update_listeners):
            await listener(server, uri)

    def subscribable(self, server: str) -> bool:
        """Deprecated (nothing uses it; :meth:`subscribe_resource` checks the server itself):
        whether ``server`` is ready and announced ``resources.subscribe``."""
        warnings.warn(
            "MCPSupervisor.subscribable is deprecated: subscribe_resource checks the server",
            DeprecationWarning,
            stacklevel=2,
        )
        connection = self._connections.get(server)
        session = connection._session if connection is not None else None
        return (
            session is not None
            and connection is not None
            and (connection.state == "ready" and supports_subscribe(session))
        )

    async def subscribe_resource(self, server: str, uri: str) -> None:
        """Subscribe to ``uri`` (as the server spells it) on ``server``; kept across its
        restarts until :meth:`unsubscribe_resource`.

        Raises:
            UnknownToolError: no such server.
            UpstreamProtocolError: the server offers no subscriptions, too many are open, or it
                refused (its JSON-RPC code in ``details["jsonrpc_code"]``).
            UpstreamUnavailableError, ToolTimeoutError: as for :meth:`get_prompt`.
        """
        connection = self._connections.get(server)

        async def send(session: ClientSession) -> None:
            assert connection is not None
            try:
                await connection.subscribe_resource(uri)
            except ValueError as error:
                raise UpstreamProtocolError(str(error), details={"server": server}) from None

        await request_on(self._connections, server, f"resources/subscribe {uri!r}", send, None)

    async def unsubscribe_resource(self, server: str, uri: str) -> None:
        """Stop the subscription to ``uri`` on ``server`` (never raises)."""
        connection = self._connections.get(server)
        if connection is not None:
            with anyio.move_on_after(connection.settings.call_timeout or 30.0):
                await connection.unsubscribe_resource(uri)

    def catalogs(self) -> dict[str, ServerCatalog]:
        """Each ready server's prompts, resources and templates, in registration order; a
        server that is not ready is left out (its items are hidden, the others' are not)."""
        return {
            name: connection.catalog
            for name, connection in self._connections.items()
            if connection.state == "ready"
        }

    async def get_prompt(
        self,
        server: str,
        name: str,
        arguments: dict[str, str] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - like call_tool's
    ) -> types.GetPromptResult:
        """``prompts/get`` on ``server`` (``name`` as the server spells it).

        Raises:
            The errors of :func:`~sagents.mcp._requests.request_on` (``UnknownToolError``,
            ``UpstreamUnavailableError``, ``UpstreamProtocolError``, ``ToolTimeoutError``).
        """

        async def send(session: ClientSession) -> types.GetPromptResult:
            result = await session.get_prompt(name, arguments)
            if not isinstance(result, types.GetPromptResult):
                raise RuntimeError("the server asked for input; the gateway cannot forward that")
            return result

        return await request_on(self._connections, server, f"prompts/get {name!r}", send, timeout)

    async def read_resource(
        self,
        server: str,
        uri: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - like call_tool's
    ) -> types.ReadResourceResult:
        """``resources/read`` of ``uri`` (as the server spells it) on ``server``.

        Raises:
            The errors of :meth:`get_prompt`.
        """

        async def send(session: ClientSession) -> types.ReadResourceResult:
            result = await session.read_resource(uri)
            if not isinstance(result, types.ReadResourceResult):
                raise RuntimeError("the server asked for input; the gateway cannot forward that")
            return result

        return await request_on(self._connections, server, f"resources/read {uri!r}", send, timeout)

    async def read_directory(
        self,
        server: str,
        uri: str,
        cursor: str | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - like call_tool's
    ) -> ReadResourceDirectoryResult:
        """``resources/directory/read`` of ``uri`` (as the server spells it) on ``server`` (a
        server declaring ``directoryRead``; the Skills extension, "Reading Directories").

        Raises:
            The errors of :meth:`get_prompt`.
        """

        async def send(session: ClientSession) -> ReadResourceDirectoryResult:
            request = ReadResourceDirectoryRequest(
                params=ReadResourceDirectoryRequestParams(uri=uri, cursor=cursor)
            )
            return await session.send_request(request, ReadResourceDirectoryResult)

        return await request_on(
            self._connections,
            server,
            f"resources/directory/read {uri!r}",
            send,
            timeout,
        )

    async def complete(
        self,
        server: str,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - like call_tool's
    ) -> types.CompleteResult:
        """``completion/complete`` on ``server`` (``ref`` as the server spells it).

        Raises:
            The errors of :meth:`get_prompt`.
        """

        async def send(session: ClientSession) -> types.CompleteResult:
            return await session.complete(ref, argument, context_arguments)

        return await request_on(self._connections, server, "completion/complete", send, timeout)

    async def send_request(
        self,
        server: str,
        request: types.Request[Any, Any],
        result_type: type[_R],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - like call_tool's
    ) -> _R:
        """Send ``request`` (any method, such as an extension's ``skills/list``) to ``server``
        and validate its answer as ``result_type``, with the call path's limits.

        Raises:
            The errors of :meth:`get_prompt`.
        """

        async def send(session: ClientSession) -> _R:
            return await session.send_request(request, result_type)

        return await request_on(self._connections, server, str(request.method), send, timeout)

    # ---- calls ------------------------------------------------------------------------------

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the seed API's per-call timeout
        progress_callback: ProgressFnT | None = None,
    ) -> ToolResult:
        """Call ``tool`` (its original name) on ``server``; never raises for a failed call.

        Waits for a free slot (``max_concurrency``) and, for a failed server, for its restart.
        A server that dies during the call fails it at once with ``upstream_unavailable``; the
        call is retried once on a fresh connection only when the request provably never
        reached the server, or the tool is annotated read-only or idempotent. Cancelling the
        caller sends ``notifications/cancelled`` upstream and re-raises the cancellation.

        Args:
            server: The registered server name.
            tool: The tool's name on the server.
            arguments: The arguments object (validated upstream; the registry validates first).
            timeout: Seconds for the whole call (waiting included); None uses the server's
                ``call_timeout``.
            progress_callback: Awaited with ``(progress, total, message)`` for each
                ``notifications/progress`` of this call.

        Returns:
            The converted result; failures carry ``error.code``: ``unknown_tool``,
            ``timeout``, ``upstream_unavailable``, ``upstream_protocol_error`` (a JSON-RPC
            error, its code in ``details["jsonrpc_code"]``) or ``invalid_arguments``.
        """
        try:
            connection = self._connection_for(server, tool)
            limit = timeout if timeout is not None else connection.settings.call_timeout
            result: ToolResult | None = None
            started = anyio.current_time()
            with anyio.move_on_after(limit):
                result = await self.call_tool_raising(
                    server, tool, arguments, progress_callback=progress_callback
                )
            if result is None and (limit is None or anyio.current_time() - started < limit):
                # An in-process server's handler runs under our await; closing it lands here.
                raise UpstreamUnavailableError(
                    f"MCP server {server!r} closed during the call",
                    details={"server": server, "tool": tool},
                )
            if result is None:
                raise ToolTimeoutError(
                    f"tool {tool!r} of MCP server {server!r} did not answer within {limit} s",
                    hint="the request was cancelled upstream; retry with a longer timeout",
                    details={"server": server, "tool": tool, "timeout": limit},
                )
            return result
        except SagentsError as error:
            return ToolResult.from_exception(error)

    def _connection_for(self, server: str, tool: str) -> ServerConnection:
        connection = self._connections.get(server)
        if connection is None:
            raise UnknownToolError(
                f"no MCP server {server!r}", details={"server": server, "tool": tool}
            )
        return connection

    async def call_tool_raising(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress_callback: ProgressFnT | None = None,
    ) -> ToolResult:
        """Call ``tool`` on ``server`` as :meth:`call_tool` does, but raise a failure as its
        typed error and apply no timeout: the caller bounds the call.

        This is the step of ``ToolManager.run_tool``'s call path (an MCP tool's registry
        handler): ``run_tool`` decides the call's timeout (the server's ``call_timeout`` unless
        the caller gives one) and is the one place a failure becomes a result
        (docs/architecture.md, "Where errors become results"). Cancelling the caller, the
        timeout included, sends ``notifications/cancelled`` upstream.

        Raises:
            UnknownToolError: no such server.
            UpstreamUnavailableError: the server died or its connection ended during the call.
            UpstreamProtocolError: a JSON-RPC error or an invalid result.
            InvalidArgumentsError: the server refused the arguments (``-32602``).
            ToolTimeoutError: the server answered ``-32001`` (request timeout).
        """
        connection = self._connection_for(server, tool)
        arguments = arguments or {}
        name = connection.name
        redactor = connection.settings.redactor
        if redactor and progress_callback is not None:
            progress_callback = _redacted_progress(progress_callback, redactor)
        for attempt in range(2):
            session = connection.live_session
            if session is None:
                session = await connection.ready_session()
            reason = "the connection closed during the call"
            async with connection.call_slot():
                with track_send() as mark:
                    async with connection.call_scope() as scope:
                        try:
                            # _tasks_client.call_tool_or_task's two steps
                            raw = await session.call_tool(
                                tool,
                                arguments,
                                progress_callback=progress_callback,
                                allow_claimed=True,
                            )
                            if not isinstance(raw, types.CallToolResult):
                                raw = await resolve_claimed(
                                    raw, session, tool, statuses=connection.task_statuses
                                )
                        except anyio.get_cancelled_exc_class():
                            # Timed out or cancelled by the caller: is the server still there?
                            connection.check_liveness()
                            raise
                        except MCPError as error:
                            if _session_expired(error) and isinstance(
                                connection.params, StreamableHttpServerParameters
                            ):
                                # HTTP 404 for our session id: the server never ran the request,
                                # so a new session (re-initialisation) may safely send it again.
                                reason = "the server no longer knows our HTTP session"
                                mark.sent = False
                            elif error.code != CONNECTION_CLOSED and not connection.closing:
                                raise _jsonrpc_error(name, tool, error, redactor) from None
                        except TRANSPORT_ERRORS as error:
                            reason = f"the transport failed during the call: {error}"
                        except (RuntimeError, ValidationError) as error:
                            raise UpstreamProtocolError(
                                f"MCP server {name!r} answered tools/call {tool!r} with an invalid "
                                f"result: {error}",
                                details={"server": name, "tool": tool},
                            ) from None
                        else:
                            if redactor:  # docs/gateway.md, "Secrets"
                                return redactor.result(convert_result(raw))
                            return convert_result(raw)
                if scope.cancelled_caught:
                    reason = "the connection ended during the call"
            connection.mark_dead(reason)
            retry = not mark.sent or _retry_safe(connection, tool)
            if attempt == 0 and retry and not connection.closing:
                logger.info("MCP server %r: retrying %r on a new connection", name, tool)
                continue
            raise UpstreamUnavailableError(
                f"MCP server {name!r} is unavailable: {reason}",
                hint="the server will be restarted on the next call",
                details={"server": name, "tool": tool, "log": str(connection.log_path)},
            )
        raise AssertionError("unreachable")  # pragma: no cover


def _redacted_progress(forward: ProgressFnT, redactor: Redactor) -> ProgressFnT:
    """``forward`` given each progress message with the secrets redacted."""

    async def redacted(progress: float, total: float | None, message: str | None) -> None:
        await forward(progress, total, redactor.redact(message) if message else message)

    return redacted


def _session_expired(error: MCPError) -> bool:
    # How the SDK's Streamable HTTP transport spells an HTTP-level rejection without a JSON-RPC
    # body: 404 on a known session, or another 4xx/5xx (servers answer an unknown session id
    # with 400 too). The server did not run the request either way.
    return (error.code == INVALID_REQUEST and error.message == "Session terminated") or (
        error.code == INTERNAL_ERROR and error.message == "Server returned an error response"
    )


def _retry_safe(connection: ServerConnection, tool: str) -> bool:
    listed = connection.tool(tool)
    hints = listed.annotations if listed is not None else None
    return hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)


def _jsonrpc_error(
    server: str, tool: str, error: MCPError, redactor: Redactor | None = None
) -> SagentsError:
    """The typed error of a JSON-RPC error answer (its message and data redacted)."""
    details = {"server": server, "tool": tool, "jsonrpc_code": error.code}
    if error.error.data is not None:
        details["data"] = redactor.redact_json(error.error.data) if redactor else error.error.data
    message = redactor.redact(error.message) if redactor else error.message
    text = f"MCP server {server!r} answered tools/call {tool!r} with error {error.code}: {message}"
    if error.code == INVALID_PARAMS:
        return InvalidArgumentsError(text, details=details)
    if error.code == REQUEST_TIMEOUT:
        return ToolTimeoutError(text, details=details)
    return UpstreamProtocolError(text, details=details)

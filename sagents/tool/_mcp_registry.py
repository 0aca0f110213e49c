"""The ToolManager's MCP servers: one supervisor, each server's tools as registry entries.

``ToolManager.register_mcp_server`` (docs/architecture.md, "From the library") delegates here.
The supervisor (:class:`sagents.mcp.MCPSupervisor`) owns the connections and is closed with the
manager; each upstream tool becomes a ``(ToolSpec, handler)`` entry named ``<server>__<tool>``
whose handler calls the supervisor, so an MCP call takes the same path as a local one
(validation, timeout, the one exception→result boundary, progress binding). When a server's tool
list changes (``notifications/tools/list_changed``), its entries are replaced.

Upstream progress notifications (MCP spec, "Progress") become ``tool_progress`` text on the
``info`` stream of the calling tool call, e.g. ``"progress 3/10: copying"``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from mcp.shared.dispatcher import ProgressFnT

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import ToolNameConflictError, UnknownToolError
from sagents.mcp import MCPSupervisor, ServerParams, ServerSettings, ServerStatus
from sagents.progress._binding import ToolCallBinding, listened_tool_call
from sagents.tool._context import PRINCIPAL_KEY
from sagents.tool._handler import ToolCall, ToolHandler

if TYPE_CHECKING:
    from pathlib import Path

    from sagents.mcp._oauth import PrincipalConnections
    from sagents.tool.tool_manager import ToolManager

__all__ = ["MCPRegistry", "format_upstream_progress"]

logger = logging.getLogger(__name__)


def format_upstream_progress(progress: float, total: float | None, message: str | None) -> str:
    """Render an upstream ``notifications/progress`` as one line of ``info`` text."""
    amount = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
    return f"progress {amount}: {message}\n" if message else f"progress {amount}\n"


class MCPRegistry:
    """The MCP servers of one :class:`ToolManager` (created by it on first use).

    Args:
        manager: The registry that receives the servers' tools.
        log_dir: Where stdio servers' stderr goes; the supervisor's default when None.
    """

    def __init__(self, manager: ToolManager, *, log_dir: Path | None = None) -> None:
        self._manager = manager
        self._tools: dict[str, list[str]] = {}
        self.listeners: list[Callable[[str, list[str]], Awaitable[None]]] = []
        self.supervisor = MCPSupervisor(log_dir=log_dir, on_tools_changed=self._tools_changed)
        self.routes: dict[str, PrincipalConnections] = {}
        """Servers whose calls go to the calling principal's own connection (docs/oauth.md)."""

    async def register(
        self,
        name: str,
        params: ServerParams,
        settings: ServerSettings | None = None,
        *,
        wait: bool = True,
    ) -> list[str]:
        """Connect to a server and register its tools; see ``ToolManager.register_mcp_server``."""
        if not wait:
            # The first listing arrives later, through _tools_changed, which needs the name.
            self._tools.setdefault(name, [])
        try:
            specs = await self.supervisor.add_server(name, params, settings, wait=wait)
        except BaseException:
            if not wait:
                self._tools.pop(name, None)
            raise
        if not wait:
            return []
        try:
            return self._install(name, specs, strict=True)
        except ToolNameConflictError:
            await self.supervisor.remove_server(name)
            self._tools.pop(name, None)
            raise

    async def register_many(
        self, servers: Mapping[str, tuple[ServerParams, ServerSettings]], *, wait: bool = True
    ) -> dict[str, ServerStatus]:
        """Start several servers side by side and register the tools of those that came up.

        Every server waits only for itself (bounded by its connect and list timeouts); one that
        fails stays registered with status ``failed`` and its last error, and no tools. A tool
        name taken already (by a local tool or an earlier server) is skipped with a warning.

        With ``wait=False`` nothing is awaited: each server's tools are registered when it
        becomes ready (and the manager's ``on_mcp_tools_changed`` listeners hear of it).

        Returns:
            Each server's status after its first start attempt (or now, without ``wait``), in
            the given order.

        Raises:
            ToolDefinitionError, ToolNameConflictError: a bad or taken server name, before any
                server starts.
        """
        if not wait:
            fresh = [name for name in servers if name not in self._tools]
            for name in fresh:
                self._tools[name] = []  # later listings are installed by _tools_changed
            try:
                return await self.supervisor.add_servers(dict(servers), wait=False)
            except BaseException:
                for name in fresh:
                    self._tools.pop(name, None)
                raise
        statuses = await self.supervisor.add_servers(dict(servers))
        for name in servers:
            # No await from here on: later listings reach _tools_changed once _tools knows them.
            self._install(name, self.supervisor.tools(name), strict=False)
        return {name: self.supervisor.status(name) for name in statuses}

    async def unregister(self, name: str, *, drain_s: float = 0.0) -> list[str]:
        """Close a server's connection and remove its tools; returns the removed names.

        ``drain_s``: seconds its calls in flight get to finish first (its tools are removed
        at once).

        Raises:
            UnknownToolError: no MCP server of that name is registered.
        """
        if name not in self.supervisor.server_names:
            raise UnknownToolError(
                f"no MCP server named {name!r} is registered",
                details={"server": name},
            )
        removed = self._uninstall(name)
        await self.supervisor.remove_server(name, drain_s=drain_s)
        return removed

    def status(self, name: str) -> ServerStatus:
        """The server's state, last error and withheld tools.

        Raises:
            KeyError: no MCP server of that name is registered.
        """
        return self.supervisor.status(name)

    def statuses(self) -> list[ServerStatus]:
        """Every registered server's status."""
        return self.supervisor.statuses()

    # -- internals ----------------------------------------------------------------------------

    def _install(self, server: str, specs: list[ToolSpec], *, strict: bool) -> list[str]:
        installed: list[str] = []
        try:
            for spec in specs:
                try:
                    self._manager.register_tool((spec, self._handler(spec)))
                except ToolNameConflictError:
                    if strict:
                        raise
                    logger.warning(
                        "MCP server %r: tool %r is not registered, the name is already taken",
                        server,
                        spec.name,
                    )
                    continue
                installed.append(spec.name)
        except ToolNameConflictError:
            for name in installed:
                self._manager.unregister_tool(name)
            raise
        self._tools[server] = installed
        return list(installed)

    def _uninstall(self, server: str) -> list[str]:
        removed = self._tools.pop(server, [])
        for name in removed:
            if self._manager.has_tool(name):
                self._manager.unregister_tool(name)
        return removed

    async def _tools_changed(self, server: str, specs: tuple[ToolSpec, ...]) -> None:
        if self._manager.closed or server not in self._tools:
            return  # the first listing is installed by register(); later ones land here
        self._uninstall(server)
        names = self._install(server, list(specs), strict=False)
        logger.info("MCP server %r changed its tools; now %d registered", server, len(names))
        for listener in list(self.listeners):
            await listener(server, names)

    def _handler(self, spec: ToolSpec) -> ToolHandler:
        server = spec.source.server or ""
        original = spec.source.original_name or spec.name
        supervisor = self.supervisor

        route = self.routes.get(server)
        if route is not None:

            async def call_as_principal(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
                binding = listened_tool_call()
                return await route.call(
                    str(call.session_context.trusted.get(PRINCIPAL_KEY, "")),
                    original,
                    arguments,
                    _progress_to(binding) if binding is not None else None,
                )

            return call_as_principal

        def call_upstream(
            arguments: dict[str, Any], call: ToolCall
        ) -> Coroutine[Any, Any, ToolResult]:
            # A progress token only when someone listens to the session as the call starts:
            # without one the SDK routes nothing and the server reports nothing for the call.
            binding = listened_tool_call()
            # Typed errors and no timer of its own: run_tool bounds the call by call.timeout
            # and turns a failure into its result. The supervisor's coroutine itself is the
            # handler's (no frame of this function for every resumption of the call).
            return supervisor.call_tool_raising(
                server,
                original,
                arguments,
                progress_callback=_progress_to(binding) if binding is not None else None,
            )

        return call_upstream


def _progress_to(binding: ToolCallBinding) -> ProgressFnT:
    # The SDK calls this from its receive loop (another task), so the binding is captured here.
    async def forward(progress: float, total: float | None, message: str | None) -> None:
        binding.emit(format_upstream_progress(progress, total, message), "info")

    return forward

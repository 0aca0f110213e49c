"""``sagents serve`` on the real layers: the config's MCP servers, skills and progress.

:class:`ConfiguredGateway` is the :class:`~sagents.gateway.server.Gateway` that
:func:`~sagents.gateway.factory.build_gateway` returns (docs/gateway.md):

- one :class:`~sagents.tool.tool_manager.ToolManager` holds every configured MCP server's tools
  (``<server>__<tool>``, with their annotations and permission classes), the local tools of the
  ``localTools`` modules (plain names; a clash with any other tool is refused) and, when the
  config has a ``skills`` section, ``load_skill`` / ``read_skill_file``;
- the gateway serves it through a :class:`~sagents.tool.tool_proxy.ToolProxy`, set as the
  gateway's provider once the manager is open (before that the gateway serves no tools); each
  session's mode and profile filter what is offered (:mod:`sagents.gateway.policy`) and the
  proxy applies its mode, with the answer the gateway got from the client
  (:class:`~sagents.gateway.approval.GatewayCallApprover`);
- the manager's progress hub feeds each call's ``tool_progress`` (upstream
  ``notifications/progress`` arrive as ``info`` text) to the client as
  ``notifications/progress`` (:class:`~sagents.gateway.sources.HubProgressSource`);
- ``run_script`` is offered when upstream MCP tools exist, one
  :class:`~sagents.script.session.RunScriptTool` per client session, in the bubblewrap sandbox
  of the gateway's workspace (:mod:`sagents.gateway.scripts`); where bubblewrap is unavailable
  it is not offered, with a warning, and everything else is still served;
- skill files are resources (``skill://<skill>/<path>``); the skills of servers whose entry
  says ``"skills": true`` join them as ``<server>__<skill>``, listed from ``skills/list`` and
  fetched on first use (:mod:`sagents.gateway.upstream_skills`);
- an upstream ``notifications/tools/list_changed`` is applied to the registry by the tool core,
  then passed on to every connected client.

Servers are started side by side when the gateway is entered
(:func:`sagents.config.tools.build_tool_manager`); one that cannot start is logged, stays
registered as ``failed`` with no tools and is retried in the background, so one broken server
does not keep the others from being served. ``sagents serve`` enters without waiting for them
(``wait_for_servers=False``): ``initialize`` is answered at once, a ``tools/list`` waits at most
:data:`FIRST_LIST_WAIT_S` for servers still on their first start, and a server that becomes
ready later is announced with ``notifications/tools/list_changed``. Local tools are registered
after the servers: a local tool whose name an upstream tool already took is refused with a
``ConfigError`` (without waiting, the local tool keeps the name and the upstream tool is skipped
with a warning).
"""

from __future__ import annotations

import importlib
import logging
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as mt
from mcp.server.context import ServerRequestContext

from sagents.audit.store import default_data_dir
from sagents.config.loader import SagentsConfig, load_config
from sagents.config.tools import build_tool_manager
from sagents.errors import (
    ConfigError,
    SandboxUnavailableError,
    SkillRootError,
    ToolNameConflictError,
)
from sagents.gateway.approval import GatewayCallApprover
from sagents.gateway.empty import EmptyProvider
from sagents.gateway.forwarding import UpstreamForwarding
from sagents.gateway.pending import ConsoleScriptApprover
from sagents.gateway.policy import Profile
from sagents.gateway.scripts import WORKSPACES_DIR, GatewayScripts
from sagents.gateway.server import Gateway
from sagents.gateway.settings import GatewaySettings
from sagents.gateway.sources import HubProgressSource, SkillResources
from sagents.gateway.tool_search import ToolRanker, ToolSearch
from sagents.gateway.upstream_skills import SupervisorSkillRequests, upstream_skill_source
from sagents.gateway.workspaces import Workspaces
from sagents.mcp import TOOL_NAME_SEPARATOR, CatalogKind
from sagents.progress.hub import ProgressHub
from sagents.skill.manager import SkillManager
from sagents.skill.mcp_source import MCPSkillSource
from sagents.skill.proxy import SkillProxy, SkillSource
from sagents.skill.session import SkillSession
from sagents.skill.skill_tool import SkillTools
from sagents.store.location import StoreLocation, parse_store_url
from sagents.store.open import GatewayStore, open_store
from sagents.tool.approval import Approver
from sagents.tool.context import SessionContext
from sagents.tool.impl import (
    BUILTIN_TOOL_NAMES,
    ImageSettings,
    MemoryStore,
    VisionModel,
    WebFetchSettings,
    register_builtin_tools,
)
from sagents.tool.tool_manager import Registrable, ToolManager
from sagents.tool.tool_proxy import ToolProxy

__all__ = ["ConfiguredGateway"]

logger = logging.getLogger(__name__)

FIRST_LIST_WAIT_S = 8.0
"""Seconds a ``tools/list`` waits for servers still on their first start (``sagents serve``);
below the MCP Inspector's 10 s request timeout."""


class ConfiguredGateway(Gateway):
    """The gateway of a config file; ``async with`` starts its servers and closes them.

    Args:
        settings: What ``sagents serve`` was given (``settings.config`` may be None: then only
            the gateway's own tools are served).
        approver: Decides approvals instead of asking the client (tests); None asks the client.
        wait_for_servers: True (the default) enters only after every server's first start
            attempt; False enters at once and each server's tools are offered (with
            ``notifications/tools/list_changed`` to connected clients) as it becomes ready,
            so that ``sagents serve`` answers ``initialize`` without waiting for upstreams. A
            local tool then keeps its name, and an upstream tool of the same name is skipped
            with a warning.

    Raises:
        ConfigError: the config file is unreadable or invalid, a skill directory is missing, or
            a ``localTools`` module cannot be imported or has no ``TOOLS`` (raised here, before
            anything starts); on entering, a local tool whose name is already taken.
    """

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        approver: Approver | None = None,
        wait_for_servers: bool = True,
        image_model: VisionModel | None = None,
        tool_ranker: ToolRanker | None = None,
    ) -> None:
        if settings.tool_search and tool_ranker is None:
            raise ConfigError(
                "tool search needs a ranking: pass tool_ranker (sagents serve passes "
                "sagents.agent.suggest_tools)",
                key="--tool-search",
            )
        self.settings = settings
        self._wait_for_servers = wait_for_servers
        self._image_model = image_model
        self.config = load_config(settings.config) if settings.config else SagentsConfig()
        self.hub = ProgressHub()
        self._manager: ToolManager | None = None
        self._local_tools = _local_tools(self.config)
        self._skill_requests = SupervisorSkillRequests()
        self.upstream_skills = upstream_skill_source(
            self.config, self._skill_requests, on_changed=self._upstream_skills_changed
        )
        self.skills = _skills(self.config, settings, self.upstream_skills)
        self.workspaces = Workspaces(
            settings.workspace or default_data_dir() / WORKSPACES_DIR,
            shared=settings.shared_workspace,
        )
        self._scripts: GatewayScripts | None = None
        self.store_location = _store_location(self.config, settings)
        self.store: GatewayStore | None = None
        self.forwarding = UpstreamForwarding(before=self._first_start)
        self._stack = AsyncExitStack()  # what __aenter__ opened, closed by __aexit__
        background = settings.background_after_s
        if background is None:
            background = self.config.background_calls.auto_after_sec
        super().__init__(
            EmptyProvider(),  # until entered: then the manager's proxy
            mode=settings.mode,
            profile=settings.profile,
            token_profiles=settings.token_profiles,
            progress=HubProgressSource(self.hub),
            resources=SkillResources(self.skills, upstream=self.upstream_skills)
            if self.skills is not None
            else None,
            approver=approver,
            background_after_s=background,
            workspace=self.workspaces,
            upstream=self.forwarding,
            approvals=settings.approvals,
            tool_search=ToolSearch(tool_ranker)
            if settings.tool_search and tool_ranker is not None
            else None,
            name=settings.name,
        )

    @property
    def manager(self) -> ToolManager:
        """The tool registry (upstream, local and skill tools), once the gateway is entered.

        Raises:
            RuntimeError: the gateway has not been entered.
        """
        if self._manager is None:
            raise RuntimeError("enter the gateway (async with) before using its manager")
        return self._manager

    async def __aenter__(self) -> Self:
        # One exit stack owns what is opened here; it closes them in reverse order, on a
        # failure while opening as on leaving (the manager before the store, shielded).
        async with AsyncExitStack() as stack:
            store = await stack.enter_async_context(
                open_store(self.store_location, data_dir=default_data_dir())
            )
            self.store = store
            self.use_store(store)
            manager = await build_tool_manager(
                self.config, progress_hub=self.hub, wait=self._wait_for_servers
            )
            stack.push_async_callback(_close_shielded, manager)
            self._manager = manager
            for key, tool in self._local_tools:
                try:
                    manager.register_tool(tool)
                except ToolNameConflictError as error:
                    raise ConfigError(error.message, file=_file(self.config), key=key) from error
            if self.skills is not None:
                SkillTools(self._skill_session).register(manager)
            for status in manager.mcp_server_statuses():
                if status.state == "failed":
                    logger.warning("MCP server %r failed: %s", status.name, status.last_error)
            manager.on_mcp_tools_changed(self._upstream_tools_changed)
            supervisor = manager.mcp_supervisor
            if supervisor is not None:
                self.forwarding.source = supervisor
                supervisor.on_catalog_changed(self._upstream_catalog_changed)
                supervisor.on_catalog_announced(self._upstream_catalog_announced)
                self._skill_requests.supervisor = supervisor
            if self.upstream_skills is not None:
                # entered after the manager, so its listings end before the servers close
                await stack.enter_async_context(self.upstream_skills)
                for server in self.config.skills.servers:
                    if self._skill_requests.ready(server):  # the others: once they list tools
                        self.upstream_skills.refresh_soon(server)
            # the session's mode is applied by the proxy; the gateway asks the client first
            self.provider = ToolProxy(manager, approver=GatewayCallApprover())
            stack.callback(self._unbind)
            self._scripts = await self._start_scripts(stack)
            self.scripts = self._scripts
            self._register_builtins(manager)
            await super().__aenter__()
            stack.push_async_exit(super().__aexit__)
            self._stack = stack.pop_all()
        return self

    def _unbind(self) -> None:
        self.provider = EmptyProvider()
        self.forwarding.source = None
        self.scripts = None

    def _skill_session(self, context: SessionContext) -> SkillSession:
        """A session's skills: its profile's, held to loaded skills' ``allowed-tools`` through
        the session's offer (the same filter as ``tools/list`` and run_script)."""
        assert self.skills is not None
        offer = self.session_offer(context.session_id)
        profile = offer.profile if offer is not None else self.profile
        source: SkillSource = self.skills
        offered = self.offered_skills(profile)
        if offered is not None:
            source = SkillProxy(source, available_skills=sorted(offered))
        return SkillSession(source, tools=offer)

    def offered_skills(self, profile: Profile | None) -> frozenset[str] | None:
        """The profile's ``skills``, less the skills of upstream servers its ``servers``
        leaves out (an upstream server's skills are filtered like its tools)."""
        names = super().offered_skills(profile)
        if profile is None or profile.servers is None or self.upstream_skills is None:
            return names
        hidden = {
            skill.name
            for skill in self.upstream_skills.list_skills()
            if skill.name.partition(TOOL_NAME_SEPARATOR)[0] not in profile.servers
        }
        if not hidden:
            return names
        if names is None:
            assert self.skills is not None
            return frozenset(s.name for s in self.skills.list_skills()) - hidden
        return names - hidden

    def _register_builtins(self, manager: ToolManager) -> None:
        """The built-in shell and file tools the config enables (``builtinTools.enabled``), on
        the sessions' sandbox; none where bubblewrap is unavailable (with a warning)."""
        names = self.config.builtin_tools
        if not names:
            return
        if self._scripts is None:
            logger.warning("built-in tools %s are not offered: no sandbox", ", ".join(names))
            return
        if "compress_history" in names:
            raise ConfigError(
                "compress_history cannot be offered by sagents serve: the MCP client keeps "
                "the conversation",
                file=_file(self.config),
                key="builtinTools.enabled",
                hint="it works in the agent loop (SAgent, sagents chat); remove it here",
            )
        unknown = [name for name in names if name not in BUILTIN_TOOL_NAMES]
        if unknown:
            raise ConfigError(
                f"unknown built-in tool {unknown[0]!r}",
                file=_file(self.config),
                key="builtinTools.enabled",
                hint=f"the built-in tools are: {', '.join(BUILTIN_TOOL_NAMES)}",
            )
        try:
            register_builtin_tools(
                manager,
                self._scripts.sandbox_for,
                names=names,
                web_fetch=WebFetchSettings(**self.config.web_fetch),
                **self._memory_and_todo(),
                image_model=self._image_model,
                image=ImageSettings(
                    **{
                        key: value
                        for key, value in self.config.image_understanding.items()
                        if key in ("max_bytes", "max_pixels", "max_side")
                    }
                ),
            )
        except ToolNameConflictError as error:
            raise ConfigError(
                error.message, file=_file(self.config), key="builtinTools.enabled"
            ) from error

    def _memory_and_todo(self) -> dict[str, Any]:
        """The memory and todo stores of the built-in tools: the SQLite files, or the tables
        of the PostgreSQL store replicas share (docs/scale-out.md)."""
        memory = MemoryStore(anonymous_user=self.config.memory_anonymous_user)
        if self.store is None or not self.store.shared:
            return {"memory": memory}
        from sagents.store.postgres import PostgresStore
        from sagents.tool.impl.postgres import PostgresMemory, PostgresTodos
        from sagents.tool.impl.todo import TodoStore

        assert isinstance(self.store, PostgresStore)
        memory.backend = PostgresMemory(self.store.pool)
        memory.audit = self.store.audit
        return {"memory": memory, "todo": TodoStore(backend=PostgresTodos(self.store.pool))}

    def _script_approver(self) -> ConsoleScriptApprover | None:
        """run_script's approver when the console is asked (None: the client, by elicitation)."""
        if self.approvals == "elicitation":
            return None

        def permission_of(name: str) -> str:
            if self._manager is None or not self._manager.has_tool(name):
                return "write"
            return self._manager.get_tool_spec(name).permission

        return ConsoleScriptApprover(
            self.pending,
            route=self.approvals,
            owner_of=self.session_owner,
            permission_of=permission_of,
        )

    async def _start_scripts(self, stack: AsyncExitStack) -> GatewayScripts | None:
        """run_script's host, opened on ``stack``, or None (with a warning) where bubblewrap is
        unavailable."""
        scripts = GatewayScripts(
            hub=self.hub,
            workspaces=self.workspaces,
            limits=self.config.scripts,
            audit=self.store.audit if self.store is not None else None,
            protected={"config file": self.settings.config} if self.settings.config else None,
            approver=self._script_approver(),
            list_tools=not self.settings.tool_search,  # a long list would undo tool search
        )
        try:
            opened = await scripts.__aenter__()
        except SandboxUnavailableError as error:
            logger.warning("run_script is not offered: %s", error)
            return None
        # Not shielded, and told of no exception: it exits task groups entered in this task.
        stack.push_async_callback(opened.__aexit__, None, None, None)
        return opened

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, AsyncExitStack()
        return bool(await stack.__aexit__(exc_type, exc, tb))

    async def _first_start(self) -> None:
        if self._manager is not None and not self._wait_for_servers:
            # Servers still on their first start get a short while, so that a client that
            # lists (or calls) once right after initialize finds their tools; later ones are
            # announced. Once every server made its first attempt, this returns at once.
            await self._manager.wait_mcp_servers(FIRST_LIST_WAIT_S)
        if self.upstream_skills is not None:  # and their skills' first listing, as briefly
            await self.upstream_skills.first_listings(FIRST_LIST_WAIT_S)

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        await self._first_start()
        return await super()._on_list_tools(ctx, params)

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        await self._first_start()
        return await super()._on_call_tool(ctx, params)

    async def _on_list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        await self._first_start()  # upstream resources are listed like tools
        return await super()._on_list_resources(ctx, params)

    async def _upstream_tools_changed(self, server: str, names: list[str]) -> None:
        if self.upstream_skills is not None:  # listed, relisted or restarted: so are its skills
            self.upstream_skills.refresh_soon(server)
        await self.notify_tools_changed()

    async def _upstream_catalog_changed(self, server: str, kind: CatalogKind) -> None:
        if kind == "resources" and self.upstream_skills is not None:
            self.upstream_skills.refresh_soon(server)  # came or went: so did its skills
        await self.notify_list_changed(kind)

    async def _upstream_catalog_announced(self, server: str, kind: CatalogKind) -> None:
        if kind == "resources" and self.upstream_skills is not None:
            self.upstream_skills.refresh_soon(server)  # a skill's file may have changed

    async def _upstream_skills_changed(self, server: str) -> None:
        await self.notify_list_changed("resources")  # skill:// resources came or went


def _store_location(config: SagentsConfig, settings: GatewaySettings) -> StoreLocation:
    """``--store``, else the config's ``store``, else the embedded files.

    Raises:
        ConfigError: a malformed address (naming ``--store`` or the file's ``store.url``).
    """
    if settings.store:
        return parse_store_url(settings.store, lease_s=config.store_lease_s)
    return parse_store_url(
        config.store_url, key="store.url", file=_file(config), lease_s=config.store_lease_s
    )


async def _close_shielded(manager: ToolManager) -> None:
    with anyio.CancelScope(shield=True):
        await manager.aclose()


def _file(config: SagentsConfig) -> str | None:
    return str(config.source) if config.source else None


def _local_tools(config: SagentsConfig) -> list[tuple[str, Registrable]]:
    """The ``TOOLS`` of each ``localTools`` module, with the config key each came from.

    Raises:
        ConfigError: a module cannot be imported or has no ``TOOLS`` list.
    """
    found: list[tuple[str, Registrable]] = []
    for index, module_name in enumerate(config.local_tools):
        key = f"localTools.modules.{index}"
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ConfigError(
                f"cannot import {module_name!r}: {error}", file=_file(config), key=key
            ) from error
        tools = getattr(module, "TOOLS", None)
        if not isinstance(tools, list | tuple):
            raise ConfigError(
                f"module {module_name!r} has no TOOLS list", file=_file(config), key=key
            )
        found.extend((key, tool) for tool in tools)
    return found


def _skills(
    config: SagentsConfig, settings: GatewaySettings, upstream: MCPSkillSource | None
) -> SkillSource | None:
    """The skills of the config's directories, then of its skill-serving MCP servers (each
    session's profile filters them), or None without any."""
    if not config.skills.directories:
        return upstream
    manager = SkillManager()
    for index, directory in enumerate(config.skills.directories):
        try:
            manager.add_skill_dir(directory)  # each bad skill is logged by the manager
        except SkillRootError as error:
            raise ConfigError(
                error.message,
                file=str(config.source) if config.source else None,
                key=f"skills.directories.{index}",
            ) from error
    if upstream is not None:
        return SkillProxy([manager, upstream])  # local roots first: they win a shared name
    return manager  # each session's profile filters it (ConfiguredGateway._skill_session)

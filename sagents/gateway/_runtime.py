"""``sagents serve`` on the real layers: the config's MCP servers, skills and progress.

:func:`open_configured_gateway` opens what a config asks for (checked first by
:func:`plan_gateway`), then builds the :class:`ConfiguredGateway` over those open parts
(docs/gateway.md; :func:`~sagents.gateway._factory.open_gateway` is the public entry point):

- one :class:`~sagents.tool.tool_manager.ToolManager` holds every configured MCP server's tools
  (``<server>__<tool>``, with their annotations and permission classes), the local tools of the
  ``localTools`` modules (plain names; a clash with any other tool is refused), the built-in
  tools the config enables and, when the config has a ``skills`` section, ``load_skill`` /
  ``read_skill_file``;
- the gateway serves it through a :class:`~sagents.tool._tool_proxy.ToolProxy`, given to it at
  construction; each session's mode and profile filter what is offered
  (:mod:`sagents.gateway._policy`) and the proxy applies its mode, with the answer the gateway
  got from the client (:class:`~sagents.gateway._approval.GatewayCallApprover`);
- the manager's progress hub feeds each call's ``tool_progress`` (upstream
  ``notifications/progress`` arrive as ``info`` text) to the client as
  ``notifications/progress`` (:class:`~sagents.gateway._sources.HubProgressSource`);
- ``run_script`` is offered when upstream MCP tools exist, one
  :class:`~sagents.script._session.RunScriptTool` per client session, in the bubblewrap sandbox
  of the gateway's workspace (:mod:`sagents.gateway._scripts`); where bubblewrap is unavailable
  it is not offered, with a warning, and everything else is still served;
- skill files are resources (``skill://<skill>/<path>``); the skills of servers whose entry
  says ``"skills": true`` join them as ``<server>__<skill>``, listed from ``skills/list`` and
  fetched on first use (:mod:`sagents.gateway._upstream_skills`);
- an upstream ``notifications/tools/list_changed`` is applied to the registry by the tool core,
  then passed on to every connected client.

Servers are started side by side as the manager opens
(:func:`sagents.config.tools.build_tool_manager`); one that cannot start is logged, stays
registered as ``failed`` with no tools and is retried in the background, so one broken server
does not keep the others from being served. ``sagents serve`` opens without waiting for them
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
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from sagents.audit._store import default_data_dir
from sagents.config._loader import SagentsConfig, load_config
from sagents.config.tools import build_tool_manager
from sagents.core._secrets import Redactor
from sagents.errors import (
    ConfigError,
    SandboxUnavailableError,
    SkillRootError,
    ToolNameConflictError,
)
from sagents.gateway._approval import GatewayCallApprover
from sagents.gateway._forwarding import UpstreamForwarding
from sagents.gateway._lifetime import DEFAULT_SESSION_IDLE_TIMEOUT_S
from sagents.gateway._pending import ConsoleScriptApprover, PendingApprovals
from sagents.gateway._policy import Profile
from sagents.gateway._process import GatewayProcess
from sagents.gateway._scripts import WORKSPACES_DIR, GatewayScripts
from sagents.gateway._secrets import gateway_redactor, redacted_logs
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._sources import HubProgressSource, SkillResources
from sagents.gateway._tool_changes import ToolChanges
from sagents.gateway._tool_search import ToolRanker, ToolSearch
from sagents.gateway._upstream_logins import UpstreamLogins
from sagents.gateway._upstream_skills import (
    SkillsWithoutServers,
    SupervisorSkillRequests,
    upstream_skill_source,
)
from sagents.gateway._workspaces import Workspaces
from sagents.mcp import TOOL_NAME_SEPARATOR, CatalogKind, StreamableHttpServerParameters
from sagents.mcp._oauth import LoginVault
from sagents.progress._hub import ProgressHub
from sagents.skill._manager import SkillManager
from sagents.skill._mcp_source import MCPSkillSource
from sagents.skill._proxy import SkillProxy, SkillSource
from sagents.skill._session import SkillSession
from sagents.skill._skill_tool import SkillTools
from sagents.store._location import StoreLocation, parse_store_url
from sagents.store._open import GatewayStore, open_store
from sagents.tool._approval import Approver
from sagents.tool._context import SessionContext
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.impl import (
    BUILTIN_TOOL_NAMES,
    MemoryStore,
    TodoStore,
    VisionModel,
    register_builtin_tools,
)
from sagents.tool.impl._builtin import BUILTINS
from sagents.tool.tool_manager import Registrable, ToolManager

__all__ = [
    "ConfiguredGateway",
    "GatewayPlan",
    "builtin_todo_store",
    "open_configured_gateway",
    "plan_gateway",
]

logger = logging.getLogger(__name__)

FIRST_LIST_WAIT_S = 20.0
"""Seconds a ``tools/list`` waits for servers still on their first start (``sagents serve``):
long enough for a server started by ``npx``/``uvx`` or on a loaded machine, well below the MCP
SDKs' default request timeout (60 s), so that a client that lists once finds their tools."""


@dataclass(frozen=True, kw_only=True)
class GatewayPlan:
    """What a gateway of a config file will open, checked before anything opens.

    Built by :func:`plan_gateway`; :func:`open_configured_gateway` opens it.
    """

    settings: GatewaySettings
    config: SagentsConfig
    local_tools: list[tuple[str, Registrable]]
    skills: SkillSource | None
    """The skills of the config's directories (the upstream servers' join them on opening)."""
    workspaces: Workspaces
    store_location: StoreLocation
    background_after_s: float | None
    approver: Approver | None = None
    wait_for_servers: bool = True
    image_model: VisionModel | None = None
    tool_ranker: ToolRanker | None = None
    redactor: Redactor = field(default_factory=Redactor)
    """The secrets redacted from what the gateway shows (docs/gateway.md, "Secrets")."""


def plan_gateway(
    settings: GatewaySettings,
    *,
    approver: Approver | None = None,
    wait_for_servers: bool = True,
    image_model: VisionModel | None = None,
    tool_ranker: ToolRanker | None = None,
) -> GatewayPlan:
    """Read and check what ``settings`` asks for; nothing is opened or started.

    Raises:
        ConfigError: the config file is unreadable or invalid, a skill directory is missing,
            a ``localTools`` module cannot be imported or has no ``TOOLS``, or
            ``settings.tool_search`` without a ``tool_ranker``.
    """
    if settings.tool_search and tool_ranker is None:
        raise ConfigError(
            "tool search needs a ranking: pass tool_ranker (sagents serve passes "
            "sagents.agent.suggest_tools)",
            key="--tool-search",
        )
    config = load_config(settings.config) if settings.config else SagentsConfig()
    background = settings.background_after_s
    if background is None:
        background = config.background_calls.auto_after_sec
    return GatewayPlan(
        settings=settings,
        config=config,
        local_tools=_local_tools(config),
        skills=_skills(config, settings),
        workspaces=Workspaces(
            settings.workspace or default_data_dir() / WORKSPACES_DIR,
            shared=settings.shared_workspace,
        ),
        store_location=_store_location(config, settings),
        background_after_s=background,
        approver=approver,
        wait_for_servers=wait_for_servers,
        image_model=image_model,
        tool_ranker=tool_ranker,
        redactor=gateway_redactor(config, settings),
    )


@asynccontextmanager
async def open_configured_gateway(plan: GatewayPlan) -> AsyncIterator[ConfiguredGateway]:
    """Open what ``plan`` names, in order, then build and enter the gateway over them.

    One exit stack owns every part: the store, the tool manager with its upstream servers and
    local tools, the run_script host with its runtime (none where bubblewrap is unavailable,
    with a warning), the built-in tools on it, then the gateway's own tasks. A failure while
    opening closes what was opened; leaving closes them in reverse order (the manager before
    the store, shielded).

    Raises:
        ConfigError: a local or built-in tool whose name is already taken, or an unknown
            built-in tool.
    """
    config = plan.config
    async with AsyncExitStack() as stack:
        stack.enter_context(redacted_logs(plan.redactor))
        store = await stack.enter_async_context(
            open_store(plan.store_location, data_dir=default_data_dir())
        )
        vault = _login_vault(config, store, plan.settings)
        manager = await build_tool_manager(
            config,
            progress_hub=ProgressHub(),
            wait=plan.wait_for_servers,
            definition_pins=store.pins,
            redactor=plan.redactor,
            logins=vault,
        )
        stack.push_async_callback(_close_shielded, manager)
        upstream_logins = None
        if vault is not None:
            upstream_logins = await stack.enter_async_context(
                UpstreamLogins(vault, _oauth_servers(config)).running()
            )
        for key, tool in plan.local_tools:
            try:
                manager.register_tool(tool)
            except ToolNameConflictError as error:
                raise ConfigError(error.message, file=_file(config), key=key) from error
        # this process and its console approvals, held in the store: built before the
        # script host's approver and the gateway that share them
        process = GatewayProcess(store)
        pending = PendingApprovals(
            timeout_s=config.approval_timeout_s, held=process.held_cards(plan.redactor)
        )
        scripts: GatewayScripts | None = GatewayScripts(
            hub=manager.progress_hub,
            workspaces=plan.workspaces,
            limits=config.scripts,
            audit=store.audit,
            protected={"config file": plan.settings.config} if plan.settings.config else None,
            approver=_script_approver(plan.settings, pending, manager),
            list_tools=not plan.settings.tool_search,  # a long list would undo tool search
            quotas=config.quotas,
            redactor=plan.redactor,
        )
        try:
            scripts = await stack.enter_async_context(scripts)  # type: ignore[arg-type]  # set above
        except SandboxUnavailableError as error:
            logger.warning("run_script is not offered: %s", error)
            scripts = None
        _register_builtins(manager, config, scripts, store, plan.image_model)
        gateway = ConfiguredGateway(
            plan,
            manager=manager,
            store=store,
            scripts=scripts,
            pending=pending,
            process=process,
            upstream_logins=upstream_logins,
        )
        yield await stack.enter_async_context(gateway)


class ConfiguredGateway(Gateway):
    """The gateway of a config file, built from parts already open.

    :func:`~sagents.gateway._factory.open_gateway` (or ``build_gateway``) opens the parts and
    builds it; entering it starts the skills of the skill-serving upstream servers (their
    source is built here, told of its changes by this gateway) and the gateway's own tasks.
    It serves ``manager`` through a :class:`~sagents.tool._tool_proxy.ToolProxy` whose
    approver takes the answer the gateway got from the client
    (:class:`~sagents.gateway._approval.GatewayCallApprover`), with the manager's progress hub
    as the source of each call's progress, the store's tasks and approvals, ``scripts`` for
    ``run_script`` (its quotas charge the results the store keeps), and the upstream servers'
    prompts and resources; it registers the skill tools of the plan's skills in ``manager``.
    Every part is given complete at construction: nothing is wired afterwards.

    Args:
        plan: What the config asked for (:func:`plan_gateway`).
        manager: The open tool registry (upstream, local and built-in tools).
        store: The open store (tasks, approvals, audit).
        scripts: The open run_script host, or None (not offered).
        pending: The approvals waiting for the web console (the script host's approver
            shares it), held in ``store`` for ``process``.
        process: This process over ``store`` (its boot id); None: a new one.
        upstream_logins: The ``"auth": "oauth"`` servers' logins, or None.

    Raises:
        ConfigError: a skill tool's name is already taken.
    """

    def __init__(
        self,
        plan: GatewayPlan,
        *,
        manager: ToolManager,
        store: GatewayStore,
        scripts: GatewayScripts | None,
        pending: PendingApprovals,
        process: GatewayProcess | None = None,
        upstream_logins: UpstreamLogins | None = None,
    ) -> None:
        settings = plan.settings
        self.upstream_logins = upstream_logins
        """The ``"auth": "oauth"`` servers' logins (the console's Servers page), or None."""
        self.settings = settings
        self.config = plan.config
        self._skill_requests = SupervisorSkillRequests(manager.mcp_supervisor)
        upstream_skills = upstream_skill_source(
            plan.config, self._skill_requests, on_changed=self._upstream_skills_changed
        )
        self.upstream_skills: MCPSkillSource | None = upstream_skills
        """The skills of the skill-serving upstream servers, or None (entered with the
        gateway, after the manager: their listings end before the servers close)."""
        self.skills: SkillSource | None = plan.skills
        if upstream_skills is not None:  # local roots first: they win a shared name
            self.skills = (
                SkillProxy([plan.skills, upstream_skills])
                if plan.skills is not None
                else upstream_skills
            )
        self.workspaces = plan.workspaces
        self.store_location = plan.store_location
        self.store: GatewayStore = store
        self._manager = manager
        self.tool_changes = ToolChanges(pins=store.pins, supervisor=manager.mcp_supervisor)
        """The held changes of upstream tool definitions (the console shows and accepts them)."""
        self.hub = manager.progress_hub
        self._scripts = scripts
        self._wait_for_servers = plan.wait_for_servers
        self.first_list_wait_s = FIRST_LIST_WAIT_S
        """How long a list or call waits for servers still on their first start (read at each
        wait)."""
        self._servers_started = False  # every server made its first start attempt
        self.forwarding = UpstreamForwarding(manager.mcp_supervisor, before=self._first_start)
        super().__init__(
            # the session's mode is applied by the proxy; the gateway asks the client first
            ToolProxy(manager, approver=GatewayCallApprover()),
            mode=settings.mode,
            profile=settings.profile,
            token_profiles=settings.token_profiles,
            scope_profiles=settings.scope_profiles,
            progress=HubProgressSource(self.hub),
            resources=SkillResources(self.skills, upstream=upstream_skills)
            if self.skills is not None
            else None,
            approver=plan.approver,
            background_after_s=plan.background_after_s,
            workspace=plan.workspaces,
            scripts=scripts,
            script_preflight=plan.config.scripts.preflight,
            store=store,
            upstream=self.forwarding,
            approvals=settings.approvals,
            pending=pending,
            process=process,
            tool_search=ToolSearch(plan.tool_ranker)
            if settings.tool_search and plan.tool_ranker is not None
            else None,
            session_idle_timeout_s=plan.config.session_idle_timeout_s
            or DEFAULT_SESSION_IDLE_TIMEOUT_S,
            approval_timeout_s=plan.config.approval_timeout_s,
            name=settings.name,
            redactor=plan.redactor,
            # stored results count against the sessions' quotas
            result_charge=scripts.result_quota.charge if scripts is not None else None,
            sandboxes_alive=(lambda: scripts.sandboxes_alive) if scripts is not None else None,
            upstream_statuses=manager.mcp_supervisor.statuses
            if manager.mcp_supervisor is not None
            else None,
        )
        if self.skills is not None:
            SkillTools(self._skill_session).register(manager)
        manager.on_mcp_tools_changed(self._upstream_tools_changed)
        if manager.mcp_supervisor is not None:
            manager.mcp_supervisor.on_catalog_changed(self._upstream_catalog_changed)
            manager.mcp_supervisor.on_catalog_announced(self._upstream_catalog_announced)

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            upstream_skills = self.upstream_skills
            if upstream_skills is not None:
                await stack.enter_async_context(upstream_skills)
                for server in self.config.skills.servers:
                    if self._skill_requests.ready(server):  # the others: once they list tools
                        upstream_skills.refresh_soon(server)
            await stack.enter_async_context(super()._lifespan())
            yield

    @property
    def manager(self) -> ToolManager:
        """The tool registry (upstream, local, built-in and skill tools)."""
        return self._manager

    def _skill_session(self, context: SessionContext) -> SkillSession:
        """A session's skills: its profile's, held to loaded skills' ``allowed-tools`` through
        the session's offer (the same filter as ``tools/list`` and run_script)."""
        assert self.skills is not None
        offer = self.session_offer(context.session_id)
        profile = offer.profile if offer is not None else self.profile
        source: SkillSource = self.skills
        if profile is not None and profile.servers is not None and self.upstream_skills:
            hidden = frozenset(self.config.skills.servers) - frozenset(profile.servers)
            source = SkillsWithoutServers(source, hidden)  # by name: also skills listed later
        offered = super().offered_skills(profile)
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

    async def _first_start(self) -> None:
        if self._manager is not None and not (self._wait_for_servers or self._servers_started):
            # Servers still on their first start get a short while, so that a client that
            # lists (or calls) once right after initialize finds their tools; later ones are
            # announced. Once every server made its first attempt, it is not asked again.
            self._servers_started = await self._manager.wait_mcp_servers(self.first_list_wait_s)
        if self.upstream_skills is not None:  # and their skills' first listing, as briefly
            await self.upstream_skills.first_listings(self.first_list_wait_s)

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


def _register_builtins(
    manager: ToolManager,
    config: SagentsConfig,
    scripts: GatewayScripts | None,
    store: GatewayStore | None,
    image_model: VisionModel | None,
) -> None:
    """The built-in shell and file tools the config enables (``builtinTools.enabled``), on
    the sessions' sandbox; none where bubblewrap is unavailable (with a warning).

    Raises:
        ConfigError: an unknown built-in tool, one sagents serve cannot offer
            (``compress_history``), or a name already taken.
    """
    names = config.builtin_tools
    if not names:
        return
    if scripts is None:
        logger.warning("built-in tools %s are not offered: no sandbox", ", ".join(names))
        return
    unserved = [b for b in BUILTINS if b.name in names and b.not_served is not None]
    if unserved:
        raise ConfigError(
            f"{unserved[0].name} cannot be offered by sagents serve: {unserved[0].not_served}",
            file=_file(config),
            key="builtinTools.enabled",
            hint="remove it here",
        )
    unknown = [name for name in names if name not in BUILTIN_TOOL_NAMES]
    if unknown:
        raise ConfigError(
            f"unknown built-in tool {unknown[0]!r}",
            file=_file(config),
            key="builtinTools.enabled",
            hint=f"the built-in tools are: {', '.join(BUILTIN_TOOL_NAMES)}",
        )
    try:
        register_builtin_tools(
            manager,
            scripts.sandbox_for,
            names=names,
            web_fetch=config.web_fetch,
            **_memory_and_todo(config, store),
            image_model=image_model,
            image=config.image_understanding.caps,
        )
    except ToolNameConflictError as error:
        raise ConfigError(error.message, file=_file(config), key="builtinTools.enabled") from error


def _memory_and_todo(config: SagentsConfig, store: GatewayStore | None) -> dict[str, Any]:
    """The memory and todo stores of the built-in tools: on the store's backends when it has
    them (the tables of the PostgreSQL store replicas share, docs/scale-out.md), else the
    tools' own SQLite files."""
    if store is None or store.memory is None:
        memory = MemoryStore(anonymous_user=config.memory_anonymous_user)
    else:  # the backend writes each change's audit row in the store, with the change
        memory = MemoryStore(
            anonymous_user=config.memory_anonymous_user, backend=store.memory, audit=store.audit
        )
    if store is None or store.todos is None:
        return {"memory": memory}
    return {"memory": memory, "todo": TodoStore(backend=store.todos)}


def builtin_todo_store(gateway: ConfiguredGateway) -> TodoStore:
    """The store the gateway's ``todo_*`` tools keep their lists in (the console's Chat page
    shows a thread's list from it)."""
    todo = _memory_and_todo(gateway.config, gateway.store).get("todo")
    return todo if isinstance(todo, TodoStore) else TodoStore()


def _script_approver(
    settings: GatewaySettings, pending: PendingApprovals, manager: ToolManager
) -> ConsoleScriptApprover | None:
    """run_script's approver when the console is asked (None: the client, by elicitation)."""
    if settings.approvals == "elicitation":
        return None

    def permission_of(name: str) -> str:
        if not manager.has_tool(name):
            return "write"
        return manager.get_tool_spec(name).permission

    return ConsoleScriptApprover(pending, route=settings.approvals, permission_of=permission_of)


def _oauth_servers(config: SagentsConfig) -> dict[str, StreamableHttpServerParameters]:
    """The config's ``"auth": "oauth"`` servers, by name."""
    return {
        server.name: server.params
        for server in config.servers
        if isinstance(server.params, StreamableHttpServerParameters) and server.params.oauth
    }


def _login_vault(
    config: SagentsConfig, store: GatewayStore, settings: GatewaySettings
) -> LoginVault | None:
    """The upstream logins of the config's ``"auth": "oauth"`` servers, sealed in the
    gateway's store (docs/oauth.md); None without such a server.

    Raises:
        ConfigError: a malformed ``SAGENTS_SECRET_KEY``, or a shared store without it.
    """
    if not _oauth_servers(config):
        return None
    from sagents.mcp._oauth import load_secret_key, login_command

    key = load_secret_key(default_data_dir(), shared=store.shared)
    console = (
        settings.public_url.rstrip("/") + "/console/servers"
        if settings.transport == "http" and settings.public_url
        else None
    )

    def hint(server: str, principal: str) -> str:
        command = login_command(server, principal)
        return f"the console's Servers page ({console}) or {command}" if console else command

    return LoginVault(store.logins, key, login_hint=hint)


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


def _skills(config: SagentsConfig, settings: GatewaySettings) -> SkillSource | None:
    """The skills of the config's directories (the profile's only), or None without any."""
    if not config.skills.directories:
        return None
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
    return manager  # each session's profile filters it (ConfiguredGateway._skill_session)

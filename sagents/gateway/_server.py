"""The MCP server façade of ``sagents serve`` (docs/gateway.md), on the ``mcp`` SDK's
low-level server: the MCP handlers of one :class:`Gateway`.

One :class:`Gateway` serves one shared :class:`~sagents.tool.ToolProvider` to any number of
client sessions (:mod:`sagents.gateway._sessions`), each with its own state (tools allowed for
the session, background tasks):

- ``tools/list``: the provider's tools that the session's mode and profile offer
  (:mod:`sagents.gateway._policy`), plus ``script_status`` / ``script_cancel`` when background
  calls are on;
- ``tools/call``: the call pipeline (:mod:`sagents.gateway._pipeline`): the session's offer, the
  one decision (:mod:`sagents.gateway._decision`: MCP elicitation; on 2026-07-28 connections
  through ``InputRequiredResult``; otherwise a refusal that says how to allow the call), then
  the provider's call, with the call's progress forwarded as ``notifications/progress`` and
  cancellation from the client cancelling the provider's call; a call of a client that
  negotiated the MCP Tasks extension may be answered with a ``CreateTaskResult``;
- ``resources/list`` / ``resources/read``: the session's background tasks
  (``sagents://tasks/<id>``), so that finished results can be listed and read.

What each client is offered is that session's :class:`~sagents.gateway._offer.SessionOffer`;
docs/gateway.md ("Threat model") says what a session can see of another.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Literal, Self

import anyio
import mcp_types as mt
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents import __version__
from sagents.audit._tasks import SqliteTaskStore
from sagents.core._lifespan import Lifespan, body_errors_apart
from sagents.core._permissions import PermissionMode
from sagents.core._secrets import Redactor
from sagents.core._spec import ToolSpec
from sagents.errors import SagentsError, UpstreamSchemaError
from sagents.gateway._approval import APPROVAL_TIMEOUT_S
from sagents.gateway._convert import redact_call_tool_result, spec_to_mcp_tool, to_mcp_content
from sagents.gateway._decision import APPROVAL_INPUT_KEY, CallDecider
from sagents.gateway._ext_directory import install_directory_read
from sagents.gateway._ext_skills import SkillsExtension
from sagents.gateway._ext_tasks import TasksExtension
from sagents.gateway._extensions import install_extension
from sagents.gateway._forwarding import (
    FORWARDED_CACHE_HINTS,
    UpstreamForwarding,
    forwarding_handlers,
    split_upstream_uri,
)
from sagents.gateway._lifetime import DEFAULT_SESSION_IDLE_TIMEOUT_S, SessionLifetimes
from sagents.gateway._offer import ScriptHost, SessionOffer
from sagents.gateway._pending import ApprovalRoute, PendingApprovals
from sagents.gateway._pipeline import CallPipeline
from sagents.gateway._policy import Profile
from sagents.gateway._process import GatewayProcess
from sagents.gateway._request_state import ApprovalStates, request_state_boundary
from sagents.gateway._seams import ProgressSource, ResourceSource
from sagents.gateway._sessions import GatewaySession, GatewaySessions, ServingRules
from sagents.gateway._subscriptions import GatewayListen, ResourceRelay, subscription_handlers
from sagents.gateway._tasks import GatewayTasks, ResultCharge
from sagents.gateway._tool_search import ToolSearch
from sagents.gateway._tracing import end_call_span, server_span, trace_only_when_used
from sagents.gateway._workspaces import Workspaces
from sagents.mcp._status import ServerStatus
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.store._embedded import MemoryApprovals
from sagents.store._embedded import approval_key as stored_approval_key
from sagents.store._open import GatewayStore
from sagents.store._protocols import ApprovalStore, TaskStore
from sagents.tool._approval import Approver, check_approver
from sagents.tool._background import TASK_URI_PREFIX, task_tools
from sagents.tool._provider import ToolProvider

__all__ = ["APPROVAL_INPUT_KEY", "CACHE_HINTS", "Gateway"]

logger = logging.getLogger(__name__)

CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    method: CacheHint(ttl_ms=0, scope="private")
    for method in ("tools/list", "resources/list", "resources/read")
}
"""``ttlMs``/``cacheScope`` of the list results (2026-07-28, "Caching"): private, since what a
session is offered depends on its token and profile; immediately stale, since upstream lists
and skill files change without notice on the 2026-07-28 protocol (no standing channel)."""
_RESOURCE_NOT_FOUND = -32002  # MCP spec 2025-11-25, "Resources", "Error Handling"


class Gateway(Lifespan):
    """The MCP server façade over one tool provider; an async context manager.

    Args:
        provider: The tools served: a ``ToolProxy``, a ``ToolManager`` or any other
            :class:`~sagents.tool.ToolProvider`.
        mode: Default permission mode of sessions (a profile's mode wins).
        profile: Profile of sessions that carry no bearer token bound to another one.
        token_profiles: Over HTTP, the profile bound to each bearer token.
        scope_profiles: Over HTTP with OAuth, the profiles with ``scopes`` in the config's
            order: an access token gets the first whose scopes it holds all of (else
            ``profile``).
        progress: Where the progress events of each call come from; None forwards none.
        resources: Resources served beside the background tasks (skill files), filtered by the
            session profile's skills; None serves only the tasks.
        approver: Decides approvals instead of asking the client (tests, a terminal); None asks
            the client through MCP elicitation, and refuses when it cannot.
        background_after_s: Seconds after which a call becomes a background call; None never.
        workspace: Passed on in each call's ``SessionContext``: one directory, or the layout of
            per-session workspaces (each call gets its session's).
        scripts: Runs ``run_script`` for the sessions (offered per session, see
            :class:`~sagents.gateway._offer.SessionOffer`); None offers no ``run_script``
            beyond what the provider itself holds.
        script_preflight: Check a run_script's script before its approval is asked
            (``scripts.preflight``; docs/run_script.md, "Pre-flight check"): a script with
            visible mistakes is not asked about, and its run refuses it.
        task_store: Where handed-off calls are kept, so that ``script_status`` answers for
            them after a restart (:mod:`sagents.gateway._restart`); None keeps them in memory.
        store: An entered store whose tasks, approvals and shared secret the gateway uses
            (replicas on PostgreSQL, docs/scale-out.md). A shared store also supplies the key
            that seals ``requestState`` and the one that derives the session of each
            2026-07-28 client (its token and profile), so that any replica can answer an
            approval another asked for, and the client's calls share one workspace whichever
            replica serves them. Its tasks win over ``task_store``.
        upstream: Forwards the upstream servers' prompts, resources, templates and completion
            (:mod:`sagents.gateway._forwarding`); None serves none of them.
        approvals: Who is asked when no ``approver`` is given: ``elicitation`` (the client),
            ``console`` (the web console, :attr:`pending`) or ``both`` (first answer wins).
        pending: Where approvals wait for the console (shared with run_script's console
            approver), built complete: with a store, over ``process.held_cards(...)`` so that
            its cards outlive a restart; None: a new one, so built.
        process: This process among the gateway's earlier processes and the store's replicas
            (its boot id), over ``store``; None: a new one.
        tool_search: Tool-search mode (:mod:`sagents.gateway._tool_search`): list
            ``search_tools`` and ``tool_expand_tools``, then only the expanded tools; None
            lists every offered tool.
        session_idle_timeout_s: Seconds after which a session without a request in flight
            (and without a running background call) is ended over HTTP, and a 2026-07-28
            session's sandboxes are released (docs/configuration.md, ``sessionIdleTimeout``);
            None never.
        approval_timeout_s: Seconds an approval asked of a person waits (the console, a
            2026-07-28 client's ``input_required``, an elicitation) before it is a cancel; it
            also bounds how long a sealed ``requestState`` stays valid (docs/configuration.md,
            ``approvals.timeoutSec``).
        name: Server name announced to clients.
        redactor: Secrets redacted from every ``tools/call`` answer (docs/gateway.md,
            "Secrets"); None: nothing is.
        result_charge: Charges each result the task store is to keep for a handed-off call
            to its session's quotas (the script host's, ``quotas``); None charges nothing.
        sandboxes_alive: How many sessions' sandboxes are alive (the script host's; the
            ``sagents_sandboxes`` gauge); None: 0.
        upstream_statuses: The upstream servers' statuses (the supervisor's; the
            ``sagents_upstream_*`` gauges); None: none.

    Raises:
        ValueError: ``approval_timeout_s`` is not a positive number of seconds.
        TypeError: ``approver`` is no :class:`~sagents.tool.Approver` (no ``approve`` method).

    Use::

        async with Gateway(provider) as gateway:
            await gateway.run_stdio()
    """

    def __init__(
        self,
        provider: ToolProvider,
        *,
        mode: PermissionMode = "ask",
        profile: Profile | None = None,
        token_profiles: Mapping[str, Profile] | None = None,
        scope_profiles: Sequence[Profile] = (),
        progress: ProgressSource | None = None,
        resources: ResourceSource | None = None,
        approver: Approver | None = None,
        background_after_s: float | None = None,
        workspace: str | Workspaces | None = None,
        scripts: ScriptHost | None = None,
        script_preflight: bool = True,
        task_store: SqliteTaskStore | TaskStore | None = None,
        store: GatewayStore | None = None,
        upstream: UpstreamForwarding | None = None,
        approvals: ApprovalRoute = "elicitation",
        pending: PendingApprovals | None = None,
        process: GatewayProcess | None = None,
        tool_search: ToolSearch | None = None,
        session_idle_timeout_s: float | None = DEFAULT_SESSION_IDLE_TIMEOUT_S,
        approval_timeout_s: float = APPROVAL_TIMEOUT_S,
        name: str = "sagents",
        redactor: Redactor | None = None,
        result_charge: ResultCharge | None = None,
        sandboxes_alive: Callable[[], int] | None = None,
        upstream_statuses: Callable[[], Sequence[ServerStatus]] | None = None,
    ) -> None:
        if not (math.isfinite(approval_timeout_s) and approval_timeout_s > 0):
            raise ValueError(
                f"approval_timeout_s must be a positive number of seconds, not "
                f"{approval_timeout_s!r}"
            )
        check_approver(approver, "Gateway")
        self.approval_timeout_s = approval_timeout_s
        self.provider = provider
        self.redactor = redactor
        # what requests are served under: a reload changes it through the properties below
        self._rules = ServingRules(
            mode=mode,
            profile=profile,
            token_profiles=dict(token_profiles or {}),
            scope_profiles=tuple(scope_profiles),
            background_after_s=background_after_s,
        )
        self.progress = progress
        self.resources = resources
        self.approver = approver
        self.workspace = workspace
        self.scripts = scripts
        self.script_preflight = script_preflight
        self.upstream = upstream
        self.tool_search = tool_search
        self.approvals: ApprovalRoute = approvals
        # this process among the gateway's earlier processes and replicas: made before the
        # parts that name it (the decider, the console's held cards)
        process = process if process is not None else GatewayProcess(store)
        self.pending = (
            pending
            if pending is not None
            else PendingApprovals(timeout_s=approval_timeout_s, held=process.held_cards(redactor))
        )
        """Approvals waiting for the web console (docs/console.md)."""
        self.task_store = task_store
        self.session_idle_timeout_s = session_idle_timeout_s
        self._name = name
        self._lifecycle: Literal["new", "open", "closed"] = "new"  # entered once, then closed
        self.replica_id: str | None = None
        """This process's name among replicas of a shared store; None when not replicated."""

        # The store first: its tasks, approvals and keys are what the parts below are built on.
        approval_store: ApprovalStore
        state_key = approval_key = session_key = None
        if store is None:
            approval_store = MemoryApprovals(ApprovalStates(ttl_s=approval_timeout_s))
        else:
            approval_store = store.approvals
            approval_store.ttl_s = approval_timeout_s
            if store.secret is not None:  # replicas share it; the embedded one outlives restarts
                state_key = hashlib.sha256(b"request state" + store.secret).digest()
                approval_key = stored_approval_key(store.secret)
                if store.shared:
                    self.replica_id = store.replica_id
                    session_key = hashlib.sha256(b"session" + store.secret).digest()
        self._tasks = GatewayTasks(
            store.tasks if store is not None else task_store, charge=result_charge
        )
        # 2026-07-28 clients hear of changes on subscriptions/listen streams
        self._changes = InMemorySubscriptionBus()
        # forwarded resources' subscriptions (docs/gateway.md, "Resource subscriptions")
        self._relay = ResourceRelay(upstream) if upstream is not None else None
        # the one owner of what sessions hold beyond their requests (sandboxes, records)
        self._lifetimes = SessionLifetimes(
            self._tasks, scripts=scripts, relay=self._relay, idle_timeout_s=session_idle_timeout_s
        )
        self._sessions = GatewaySessions(
            self._rules,
            provider,
            scripts=scripts,
            ended=self._lifetimes.ended,
            session_key=session_key,
        )
        # the MCP Tasks extension (docs/gateway.md): 2026-07-28 clients that declare it
        self._task_ext = TasksExtension(
            self._tasks,
            lambda ctx: self._sessions.for_request(ctx).scope,
            approval_timeout_s=approval_timeout_s,
        )
        self._listen = GatewayListen(
            self._changes, self._relay, self._sessions.profile_of, tasks=self._task_ext
        )
        self._decider = CallDecider(
            approvals=approval_store,
            approver=approver,
            route=approvals,
            pending=self.pending,
            scripts=scripts,
            script_preflight=script_preflight,
            timeout_s=approval_timeout_s,
            store=store,
            approval_key=approval_key,
            replica_id=self.replica_id,
            boot=process.boot,
        )
        self._pipeline = CallPipeline(
            rules=self._rules,
            decider=self._decider,
            tasks=self._tasks,
            task_ext=self._task_ext,
            changes=self._changes,
            progress=progress,
            workspace=workspace,
            tool_search=tool_search,
            redactor=redactor,
        )
        from sagents.gateway._metrics import GatewayMetrics  # prometheus-client when served

        self.metrics = GatewayMetrics(
            sessions_open=lambda: len(self._sessions),
            approvals_pending=lambda: len(self.pending.pending()),
            approvals_answered=self._approvals_answered,
            background_tasks=lambda: [t.status for t in self._tasks.operator_view()],
            sandboxes=sandboxes_alive,
            upstream=upstream_statuses,
        )
        """This gateway's Prometheus metrics (docs/observability.md)."""
        self.server = self._mcp_server(
            name, upstream, request_state_boundary(name, key=state_key, ttl_s=approval_timeout_s)
        )
        """The ``mcp`` SDK's low-level server, with the gateway's handlers."""

    def _mcp_server(
        self, name: str, upstream: UpstreamForwarding | None, state_boundary: RequestStateBoundary
    ) -> Server[Any]:
        """The SDK's low-level server over this gateway's handlers and extensions."""
        profile_of = self._sessions.profile_of
        with warnings.catch_warnings():
            # logging/setLevel is deprecated from protocol 2026-07-28 (SEP-2577), but clients of
            # the handshake era (2025-06-18, 2025-11-25) still use it to filter log messages.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = _GatewayServer(
                name,
                version=__version__,
                instructions=(
                    "sagents gateway: the tools of the configured MCP servers, run_script and "
                    "skills, with permissions and live progress."
                ),
                on_list_tools=self._on_list_tools,
                on_list_resources=self._on_list_resources,
                on_read_resource=self._on_read_resource,
                on_set_logging_level=self._on_set_logging_level,
                cache_hints={**CACHE_HINTS, **(FORWARDED_CACHE_HINTS if upstream else {})},
                on_subscriptions_listen=self._listen,
                **(forwarding_handlers(upstream, profile_of) if upstream else {}),
                **(
                    subscription_handlers(self._relay, self._sessions.subscriber_of)
                    if self._relay
                    else {}
                ),
            )
        # registered by hand: its answer may also be a Tasks client's CreateTaskResult
        server.add_request_handler("tools/call", mt.CallToolRequestParams, self._on_call_tool)
        server.notifications = NotificationOptions(
            resources_changed=True, tools_changed=True, prompts_changed=bool(upstream)
        )
        trace_only_when_used(server.middleware)  # the SDK's spans, when they can be used
        server.middleware.append(state_boundary)
        if self.resources is not None:  # the MCP Skills extension (docs/gateway.md)
            skills = SkillsExtension(
                self.resources, lambda ctx: self.offered_skills(profile_of(ctx))
            )
            install_extension(server, skills)
            install_directory_read(server, self.resources, profile_of, upstream)
        install_extension(server, self._task_ext)
        return server

    # The rules in force, which a reload changes ---------------------------------------------

    @property
    def mode(self) -> PermissionMode:
        """Default permission mode of sessions (a profile's mode wins)."""
        return self._rules.mode

    @mode.setter
    def mode(self, mode: PermissionMode) -> None:
        self._rules.mode = mode

    @property
    def profile(self) -> Profile | None:
        """Profile of sessions that carry no bearer token bound to another one."""
        return self._rules.profile

    @profile.setter
    def profile(self, profile: Profile | None) -> None:
        self._rules.profile = profile

    @property
    def token_profiles(self) -> dict[str, Profile]:
        """Over HTTP, the profile bound to each bearer token."""
        return self._rules.token_profiles

    @token_profiles.setter
    def token_profiles(self, profiles: Mapping[str, Profile]) -> None:
        self._rules.token_profiles = dict(profiles)

    @property
    def scope_profiles(self) -> tuple[Profile, ...]:
        """Over HTTP with OAuth, the profiles with ``scopes``, in the config's order."""
        return self._rules.scope_profiles

    @scope_profiles.setter
    def scope_profiles(self, profiles: Sequence[Profile]) -> None:
        self._rules.scope_profiles = tuple(profiles)

    @property
    def configured_profiles(self) -> frozenset[str] | None:
        """The profile names the configuration holds now, once it was reloaded
        (:mod:`sagents.gateway._reload`): a session whose profile is not among them is
        refused. None: never reloaded, nothing to check."""
        return self._rules.configured_profiles

    @configured_profiles.setter
    def configured_profiles(self, names: frozenset[str] | None) -> None:
        self._rules.configured_profiles = names

    @property
    def background_after_s(self) -> float | None:
        """Seconds after which a call becomes a background call; None never."""
        return self._rules.background_after_s

    @background_after_s.setter
    def background_after_s(self, seconds: float | None) -> None:
        self._rules.background_after_s = seconds

    # Approvals ------------------------------------------------------------------------------

    @property
    def elicited(self) -> dict[str, int]:
        """Approvals asked of the MCP client alone (elicitation) that ended, by answer."""
        return self._decider.elicited

    def _approvals_answered(self) -> dict[str, int]:
        """Approvals answered in the console and through elicitation, by answer."""
        counts = dict(self.pending.answered)
        for answer, count in self.elicited.items():
            counts[answer] = counts.get(answer, 0) + count
        return counts

    # Lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._lifecycle != "new":
            raise RuntimeError(
                f"this gateway is {'already open' if self._lifecycle == 'open' else 'closed'}: "
                "a gateway is entered once ('async with ... as gateway:'); to serve again, "
                "build a new one"
            )
        self._lifecycle = "open"
        return await super().__aenter__()

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        try:
            async with AsyncExitStack() as stack:
                await stack.enter_async_context(self._tasks)
                await stack.enter_async_context(self._lifetimes)
                await self.pending.refresh()  # the console's cards a restart left (docs/console.md)
                if self._relay is not None:
                    # left as if nothing failed: the relay only ends its subscriptions
                    await stack.enter_async_context(body_errors_apart(self._relay))
                stack.callback(self._listen.close)
                yield
        finally:
            self._lifecycle = "closed"

    def _check_not_closed(self, what: str) -> None:
        """Raise when the gateway's ``async with`` block has ended: ``what`` would use closed parts.

        Raises:
            RuntimeError: the gateway was closed; the message names ``what``.
        """
        if self._lifecycle == "closed":
            raise RuntimeError(
                f"{what} on a closed gateway: its 'async with' block has ended and what it "
                "opened is closed; call it inside the block, or open a new gateway"
            )

    def initialization_options(self) -> InitializationOptions:
        """The server's initialization options (it announces both list-changed kinds)."""
        return self.server.create_initialization_options()

    async def notify_tools_changed(self) -> int:
        """Send ``notifications/tools/list_changed`` to every connected handshake-era client.

        Called when the provider's tools change (an upstream server's list changed). Clients
        on 2026-07-28 connections hear of it on their ``subscriptions/listen`` streams.

        Returns:
            How many handshake-era clients were notified.
        """
        return await self.notify_list_changed("tools")

    async def notify_list_changed(self, kind: Literal["tools", "prompts", "resources"]) -> int:
        """Send ``notifications/<kind>/list_changed`` to every connected handshake-era client
        (an upstream server's tools, prompts or resources changed, or it came or went); 2026-07-28
        clients hear of it on their ``subscriptions/listen`` streams.

        Returns:
            How many handshake-era clients were notified.
        """
        if kind == "tools":
            await self._changes.publish(ToolsListChanged())
        elif kind == "prompts":
            await self._changes.publish(PromptsListChanged())
        else:
            await self._changes.publish(ResourcesListChanged())
        sent = 0
        for connection in self._sessions.connections():
            send = {
                "tools": connection.send_tool_list_changed,
                "prompts": connection.send_prompt_list_changed,
                "resources": connection.send_resource_list_changed,
            }[kind]
            try:
                await send()
                sent += 1
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not notify a client of changed %s: %s", kind, error)
                self._sessions.forget_connection(connection)
        return sent

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout until it closes them.

        Raises:
            RuntimeError: the gateway was closed (its ``async with`` block has ended).
        """
        from sagents.gateway._stdio_transport import stdio_streams

        self._check_not_closed("run_stdio()")

        async with stdio_streams() as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.initialization_options())

    # Sessions -------------------------------------------------------------------------------

    def session_owner(self, session_id: str) -> str:
        """The identity of the credential that opened a live session ("" without token or
        for an unknown session): who besides the operator may answer its approvals."""
        return self._sessions.identity_of(session_id)

    @property
    def tasks(self) -> GatewayTasks:
        """The background calls of every session (the web console lists and cancels them)."""
        return self._tasks

    def session_offer(self, session_id: str) -> SessionOffer | None:
        """The offer of the session ``session_id`` (as a call's ``SessionContext`` names it).

        The skills layer narrows it to a loaded skill's ``allowed-tools``.
        """
        return self._sessions.offer(session_id)

    def adopt_offer(self, session_id: str, offer: SessionOffer) -> None:
        """Make ``offer`` the offer of ``session_id``, a session the gateway did not open
        itself (a thread of the console's Chat page), so that the tools that read a session's
        offer (the skill tools: its profile's skills) read this one. Kept weakly: the caller
        holds it for as long as the session runs."""
        self._sessions.adopt_offer(session_id, offer)

    def offered_skills(self, profile: Profile | None) -> frozenset[str] | None:
        """The skill names a session of ``profile`` is offered (None: every skill)."""
        return profile.skills if profile is not None else None

    async def _ready(self) -> None:
        """Wait, bounded, for what the upstream forwarding waits for before an answer
        (``sagents serve``: servers still on their first start)."""
        if self.upstream is not None and self.upstream.before is not None:
            await self.upstream.before()

    def session_call(self, session_id: str) -> AbstractContextManager[None]:
        """Mark a call of ``session_id``, a session the gateway did not open itself (a Chat
        page thread's script session), in flight while inside: nothing ends such a session,
        so what it holds (its sandboxes and run_script host) is released once it has been
        idle for ``sessionIdleTimeout``, as a connectionless client session's is
        (:mod:`sagents.gateway._lifetime`); its next call starts them again."""
        return self._lifetimes.in_use(session_id, connectionless=True)

    # MCP handlers ---------------------------------------------------------------------------

    async def _on_set_logging_level(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SetLevelRequestParams
    ) -> mt.EmptyResult:
        """``logging/setLevel``: log messages of this session below ``level`` are not sent."""
        session = self._sessions.for_request(ctx)
        session.log_level = params.level
        session.logs_requested = True
        return mt.EmptyResult()

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        await self._ready()
        session = self._sessions.for_request(ctx)
        await self._announce_restart(ctx, session)
        # sorted by name, run_script last: the same set lists the same way, whatever order
        # the upstreams became ready in (2026-07-28, "Tools": deterministic order)
        specs = sorted(session.offer.list_specs(), key=_list_order)
        if self.tool_search is not None:
            specs = self.tool_search.listed(session.search_state(), specs)
        tools: list[mt.Tool] = []
        for spec in specs:
            try:
                tools.append(spec_to_mcp_tool(spec))
            except UpstreamSchemaError as error:
                logger.warning("withholding tool %r: %s", spec.name, error)
        if self.background_after_s is not None:
            tools.extend(task_tools())
        if self.tool_search is not None:  # the list is this session's: never shared, never stale
            return mt.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")
        return mt.ListToolsResult(tools=tools)

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> HandlerResult:
        """``tools/call``: the call pipeline, counted where its answer is known
        (docs/observability.md); a Tasks client's call that became a task is answered with
        its ``CreateTaskResult``."""
        task = self._task_ext.request_for(ctx)
        # the gateway's attributes go on the MCP SDK's server span ("tools/call NAME"), a
        # child of the client's traceparent when one came (docs/observability.md, "Traces")
        current = server_span(params.arguments)
        started = time.perf_counter()
        await self._ready()
        session = self._sessions.for_request(ctx)
        with self._lifetimes.in_use(session.session_id, connectionless=session.connectionless):
            await self._announce_restart(ctx, session)
            result = await self._pipeline.call(ctx, session, params, task)
        if isinstance(result, mt.CallToolResult):  # answered now: counted, and its span marked
            if self.redactor:
                result = redact_call_tool_result(result, self.redactor)
            seconds = time.perf_counter() - started
            upstream = self._upstream_of(ctx, params.name)  # once, for the metrics and the span
            self.metrics.count(result, tool=params.name, server=lambda: upstream, seconds=seconds)
            if current is not None:
                end_call_span(current, upstream, result)
        if task is not None and task.created is not None:
            return task.created
        return result

    def _upstream_of(self, ctx: ServerRequestContext[Any, Any], name: str) -> str:
        """The upstream server of the tool ``name`` a call was answered for, read after the
        call; ``""`` for the gateway's own tools and a name not offered."""
        try:
            spec = self._sessions.for_request(ctx).offer.get(name)
        except MCPError:  # its profile was removed during the call: the answer stands
            return ""
        return (spec.source.server if spec is not None else None) or ""

    async def _announce_restart(
        self, ctx: ServerRequestContext[Any, Any], session: GatewaySession
    ) -> None:
        """Tell a reconnecting owner, once, of its calls a restart ended (handshake sessions)."""
        if session.announced:
            return
        session.announced = True
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # no standing channel: script_status lists them
        for stored in await self._tasks.unannounced(session.owner):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await ctx.session.send_log_message(
                        "warning",
                        {
                            "event": "background.done",
                            "task_id": stored.task_id,
                            "tool": stored.tool,
                            "status": "failed",
                            "reason": stored.reason,
                            "uri": TASK_URI_PREFIX + stored.task_id,
                        },
                        logger="sagents.gateway",
                        related_request_id=ctx.request_id,  # on this request's own stream
                    )
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not tell the client of task %s: %s", stored.task_id, error)

    async def _on_list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        await self._ready()  # upstream resources are listed like tools
        session = self._sessions.for_request(ctx)
        resources = [
            mt.Resource(
                uri=TASK_URI_PREFIX + info.task_id,
                name=f"task {info.task_id}",
                description=f"background call of {info.tool!r}: {info.status}",
                mime_type="application/json",
            )
            for info in self._tasks.listed(session.scope)
        ]
        if self.resources is not None:
            resources.extend(
                mt.Resource(
                    uri=link.uri,
                    name=link.name,
                    title=link.title,
                    description=link.description,
                    mime_type=link.mime_type,
                    size=link.size,
                )
                for link in self.resources.list_resources(self.offered_skills(session.profile))
            )
        if self.upstream is not None:
            resources.extend(self.upstream.list_resources(session.profile))
        return mt.ListResourcesResult(resources=resources)

    async def _on_read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams
    ) -> mt.ReadResourceResult:
        session = self._sessions.for_request(ctx)
        uri = str(params.uri)
        try:
            if uri.startswith(TASK_URI_PREFIX):
                view = await self._tasks.view(session.scope, uri.removeprefix(TASK_URI_PREFIX))
                text = json.dumps(view, ensure_ascii=False)
                return mt.ReadResourceResult(
                    contents=[
                        mt.TextResourceContents(uri=uri, mime_type="application/json", text=text)
                    ]
                )
            if self.upstream is not None and split_upstream_uri(uri) is not None:
                return await self.upstream.read_resource(session.profile, uri)
            if self.resources is None:
                raise MCPError(_RESOURCE_NOT_FOUND, f"unknown resource {uri!r}")
            found = await self.resources.read_resource(uri, self.offered_skills(session.profile))
        except SagentsError as error:
            raise MCPError(_RESOURCE_NOT_FOUND, error.message) from error
        block = to_mcp_content(found)
        assert isinstance(block, mt.EmbeddedResource)
        return mt.ReadResourceResult(contents=[block.resource])


def _list_order(spec: ToolSpec) -> tuple[bool, str]:
    return (spec.name == RUN_SCRIPT_TOOL_NAME, spec.name)


class _GatewayServer(Server[Any]):
    """The SDK's low-level server, announcing the list changes the gateway sends.

    The SDK's streamable HTTP session manager builds each session's initialization options
    with no arguments: without this default, handshake-era HTTP clients would be told that no
    list changes while the gateway sends them ``notifications/*/list_changed``.
    """

    notifications: NotificationOptions | None = None

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or self.notifications, experimental_capabilities, extensions
        )

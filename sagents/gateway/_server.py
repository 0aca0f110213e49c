"""The MCP server façade of ``sagents serve`` (docs/gateway.md), on the ``mcp`` SDK's
low-level server.

One :class:`Gateway` serves one shared :class:`~sagents.tool.ToolProvider` to any number of
client sessions, each with its own state (tools allowed for the session, background tasks):

- ``tools/list``: the provider's tools that the session's mode and profile offer
  (:mod:`sagents.gateway._policy`), plus ``script_status`` / ``script_cancel`` when background
  calls are on;
- ``tools/call``: policy, approval (MCP elicitation; on 2026-07-28 connections through
  ``InputRequiredResult``; otherwise a refusal that says how to allow the call), then the
  provider's ``run_tool``, with the call's progress forwarded as ``notifications/progress``
  (values strictly increasing, nothing after the result) and cancellation from the client
  cancelling the provider's call;
- ``resources/list`` / ``resources/read``: the session's background tasks
  (``sagents://tasks/<id>``), so that finished results can be listed and read.

Session identity: a handshake-era connection (stdio; HTTP with ``Mcp-Session-Id``) is one session,
bound to the credential it was opened with (a request of another token is refused). A 2026-07-28
connection is one request and carries no client identity, so those requests share one session
per (bearer token, profile): "allow for this session" is not offered to them (a grant must not
leak to another client), and their background calls are scoped to the token. Without a token
(HTTP on loopback) nothing tells clients apart: their background calls are never listed, each is
reached only through its unguessable handle, which only its starter received. What each client
is offered is that session's :class:`~sagents.gateway._offer.SessionOffer`; docs/gateway.md
("Threat model") says what a session can see of another.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import os
import uuid
import warnings
import weakref
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, Self

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents import __version__
from sagents.audit._tasks import SqliteTaskStore
from sagents.core._permissions import PermissionMode
from sagents.core._result import ToolResult
from sagents.core._secrets import Redactor
from sagents.core._spec import ToolSpec
from sagents.errors import (
    ApprovalDeniedError,
    NotAllowedError,
    SagentsError,
    StoreError,
    UnknownToolError,
    UpstreamSchemaError,
)
from sagents.gateway._approval import (
    APPROVAL_TIMEOUT_S,
    CLIENT_ASKER,
    ClientAsker,
    ElicitationApprover,
    answer_from_elicitation,
    approval_form,
    denial_text,
    refusal_text,
)
from sagents.gateway._convert import (
    check_servable,
    redact_call_tool_result,
    spec_to_mcp_tool,
    to_call_tool_result,
    to_mcp_content,
)
from sagents.gateway._ext_directory import install_directory_read
from sagents.gateway._ext_skills import SkillsExtension
from sagents.gateway._ext_tasks import TASK_REQUEST, TasksExtension
from sagents.gateway._extensions import install_extension
from sagents.gateway._forwarding import (
    FORWARDED_CACHE_HINTS,
    UpstreamForwarding,
    forwarding_handlers,
    split_upstream_uri,
)
from sagents.gateway._http_security import Credential, request_credential
from sagents.gateway._lifetime import DEFAULT_SESSION_IDLE_TIMEOUT_S, SessionLifetimes
from sagents.gateway._offer import ScriptHost, SessionOffer
from sagents.gateway._pending import ApprovalRoute, PendingApproval, PendingApprovals
from sagents.gateway._policy import Profile
from sagents.gateway._principals import PRINCIPAL_KEY
from sagents.gateway._progress import ProgressForwarder, progress_listened
from sagents.gateway._questions import ElicitationQuestioner
from sagents.gateway._request_state import ApprovalStates, request_state_boundary
from sagents.gateway._restart import RESTART_REASON
from sagents.gateway._seams import ProgressSource, ResourceSource
from sagents.gateway._subscriptions import GatewayListen, ResourceRelay, subscription_handlers
from sagents.gateway._task_input import ForwardedTaskInput
from sagents.gateway._tasks import GatewayTasks, TaskScope
from sagents.gateway._tool_search import SearchState, ToolSearch
from sagents.gateway._tracing import end_call_span, server_span, trace_only_when_used
from sagents.gateway._workspaces import Workspaces
from sagents.mcp._tasks_client import TASK_INPUT
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.store._embedded import MemoryApprovals, call_digest
from sagents.store._open import GatewayStore
from sagents.store._protocols import ApprovalStore, TaskStore
from sagents.tool._approval import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    Decision,
    DecisionKind,
    approval_needed,
    settle_answer,
)
from sagents.tool._background import (
    CANCEL_TOOL,
    STATUS_TOOL,
    TASK_URI_PREFIX,
    TaskInfo,
    handed_off_result,
    task_tools,
)
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._provider import ToolProvider

__all__ = ["APPROVAL_INPUT_KEY", "CACHE_HINTS", "Gateway"]

logger = logging.getLogger(__name__)

APPROVAL_INPUT_KEY = "sagents_approval"
"""Key of the approval elicitation in an ``InputRequiredResult`` (2026-07-28 connections)."""
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    method: CacheHint(ttl_ms=0, scope="private")
    for method in ("tools/list", "resources/list", "resources/read")
}
"""``ttlMs``/``cacheScope`` of the list results (2026-07-28, "Caching"): private, since what a
session is offered depends on its token and profile; immediately stale, since upstream lists
and skill files change without notice on the 2026-07-28 protocol (no standing channel)."""
_STATE_KEY = "sagents.gateway.session"
_INVALID_REQUEST = -32600  # JSON-RPC 2.0, "Error object"
_RESOURCE_NOT_FOUND = -32002  # MCP spec 2025-11-25, "Resources", "Error Handling"


@dataclass(kw_only=True)
class _ClientSession:
    """Per-client-session state, kept apart from every other session."""

    session_id: str
    profile: Profile | None
    mode: PermissionMode
    offer: SessionOffer
    identity: str = ""
    owner: str = ""
    """Who the session's background calls belong to across restarts ("" when nothing
    identifies the client: a tokenless HTTP client)."""
    announced: bool = False
    anonymous: bool = False
    """A 2026-07-28 HTTP session without a token: many clients may share it, so its background
    calls are never listed, only reached by the handle their starter received."""
    log_level: mt.LoggingLevel = "debug"
    logs_requested: bool = False
    """The client sent ``logging/setLevel``: it reads log messages (handshake-era)."""
    search: SearchState = field(default_factory=SearchState)
    """With ``--tool-search``, the tools this session expanded."""
    workspace_path: str | None = None
    """The session's workspace path (not created) once a call named it."""
    connectionless: bool = False
    """A 2026-07-28 session (one per token and profile): no transport tells when it ends, so
    its resources are released once it idles (:mod:`sagents.gateway._lifetime`)."""

    @property
    def scope(self) -> TaskScope:
        """What the session's background calls are scoped to."""
        return TaskScope(
            session_id=self.session_id,
            owner=self.owner,
            anonymous=self.anonymous,
            principal=self.identity,
        )


class Gateway:
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
            (replicas on PostgreSQL, docs/scale-out.md); see :meth:`use_store`.
        upstream: Forwards the upstream servers' prompts, resources, templates and completion
            (:mod:`sagents.gateway._forwarding`); None serves none of them.
        approvals: Who is asked when no ``approver`` is given: ``elicitation`` (the client),
            ``console`` (the web console, :attr:`pending`) or ``both`` (first answer wins).
        pending: Where approvals wait for the console (shared with run_script's console
            approver); a new one when None.
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
        tool_search: ToolSearch | None = None,
        session_idle_timeout_s: float | None = DEFAULT_SESSION_IDLE_TIMEOUT_S,
        approval_timeout_s: float = APPROVAL_TIMEOUT_S,
        name: str = "sagents",
        redactor: Redactor | None = None,
    ) -> None:
        if not (math.isfinite(approval_timeout_s) and approval_timeout_s > 0):
            raise ValueError(
                f"approval_timeout_s must be a positive number of seconds, not "
                f"{approval_timeout_s!r}"
            )
        self.approval_timeout_s = approval_timeout_s
        self.provider = provider
        self.redactor = redactor
        self.mode: PermissionMode = mode
        self.profile = profile
        self.token_profiles: dict[str, Profile] = dict(token_profiles or {})
        self.scope_profiles = tuple(scope_profiles)
        self.configured_profiles: frozenset[str] | None = None
        """The profile names the configuration holds now, once it was reloaded
        (:mod:`sagents.gateway._reload`): a session whose profile is not among them is
        refused. None: never reloaded, nothing to check."""
        self.progress = progress
        self.resources = resources
        self.approver = approver
        self.background_after_s = background_after_s
        self.workspace = workspace
        self.scripts = scripts
        self.script_preflight = script_preflight
        self.upstream = upstream
        self.tool_search = tool_search
        self._shared_sessions: dict[str, _ClientSession] = {}
        self._sessions: weakref.WeakValueDictionary[str, _ClientSession] = (
            weakref.WeakValueDictionary()
        )
        self.approvals: ApprovalRoute = approvals
        self.pending = (
            pending if pending is not None else PendingApprovals(timeout_s=approval_timeout_s)
        )
        """Approvals waiting for the web console (docs/console.md)."""
        self.elicited: dict[str, int] = {}
        """Approvals asked of the MCP client alone (elicitation) that ended, by answer."""
        self._offers: weakref.WeakValueDictionary[str, SessionOffer] = weakref.WeakValueDictionary()
        self._tasks = GatewayTasks(task_store)
        from sagents.gateway._metrics import GatewayMetrics  # prometheus-client when served

        self.metrics = GatewayMetrics(
            sessions_open=lambda: len(self._sessions),
            approvals_pending=lambda: len(self.pending.pending()),
        )
        """This gateway's Prometheus metrics (docs/observability.md)."""
        self.metrics.background_tasks = lambda: [t.status for t in self._tasks.operator_view()]
        self.metrics.approvals_answered = self._approvals_answered
        self._approval_states = ApprovalStates(ttl_s=approval_timeout_s)
        self._approvals: ApprovalStore = MemoryApprovals(self._approval_states)
        self._session_key: bytes | None = None  # derives 2026-07-28 session ids (replicas)
        self.replica_id: str | None = None
        """This process's name among replicas of a shared store; None when not replicated."""
        self._boot = uuid.uuid4().hex  # this process: tells an approval asked before a restart
        self._approval_key: bytes | None = None  # binds 2026-07-28 approvals across processes
        self._store: GatewayStore | None = None
        self.task_store = task_store
        self._lifecycle: Literal["new", "open", "closed"] = "new"  # entered once, then closed
        self._stack = AsyncExitStack()  # what __aenter__ opened, closed by __aexit__
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()
        # 2026-07-28 clients hear of changes on subscriptions/listen streams
        self._changes = InMemorySubscriptionBus()
        # forwarded resources' subscriptions (docs/gateway.md, "Resource subscriptions")
        self._relay = ResourceRelay(upstream) if upstream is not None else None
        self._listen = GatewayListen(self._changes, self._relay, self._profile_of)
        # the one owner of what sessions hold beyond their requests (sandboxes, records)
        self.session_idle_timeout_s = session_idle_timeout_s
        self._lifetimes = SessionLifetimes(
            self._tasks, scripts=scripts, relay=self._relay, idle_timeout_s=session_idle_timeout_s
        )
        with warnings.catch_warnings():
            # logging/setLevel is deprecated from protocol 2026-07-28 (SEP-2577), but clients of
            # the handshake era (2025-06-18, 2025-11-25) still use it to filter log messages.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Server[Any] = _GatewayServer(
                name,
                version=__version__,
                instructions=(
                    "sagents gateway: the tools of the configured MCP servers, run_script and "
                    "skills, with permissions and live progress."
                ),
                on_list_tools=self._on_list_tools,
                on_call_tool=self._counted_call_tool,
                on_list_resources=self._on_list_resources,
                on_read_resource=self._on_read_resource,
                on_set_logging_level=self._on_set_logging_level,
                cache_hints={**CACHE_HINTS, **(FORWARDED_CACHE_HINTS if upstream else {})},
                on_subscriptions_listen=self._listen,
                **(forwarding_handlers(upstream, self._profile_of) if upstream else {}),
                **(subscription_handlers(self._relay, self._subscriber_of) if self._relay else {}),
            )
        self.server.notifications = NotificationOptions(
            resources_changed=True, tools_changed=True, prompts_changed=bool(upstream)
        )
        trace_only_when_used(self.server.middleware)  # the SDK's spans, when they can be used
        self._state_boundary = request_state_boundary(name, ttl_s=approval_timeout_s)
        self.server.middleware.append(self._state_boundary)
        self._name = name
        if resources is not None:  # the MCP Skills extension (docs/gateway.md)
            skills = SkillsExtension(
                resources, lambda ctx: self.offered_skills(self._session_for(ctx).profile)
            )
            install_extension(self.server, skills)
            install_directory_read(self.server, resources, self._profile_of, upstream)
        # the MCP Tasks extension (docs/gateway.md): 2026-07-28 clients that declare it
        self._task_ext = TasksExtension(
            self._tasks,
            lambda ctx: self._session_for(ctx).scope,
            approval_timeout_s=approval_timeout_s,
        )
        install_extension(self.server, self._task_ext)
        self._listen.tasks = self._task_ext  # notifications/tasks on listen streams
        if store is not None:
            self.use_store(store)

    def _client_asker(self, ctx: ServerRequestContext[Any, Any]) -> ClientAsker:
        """Asks the client of ``ctx``, waiting at most ``approval_timeout_s``."""
        return self._counting(ClientAsker(ctx, timeout_s=self.approval_timeout_s))

    def _counting(self, asker: ClientAsker) -> ClientAsker:
        """``asker`` counting the approvals its client answers, when the client alone is asked
        (with ``both``, the console's queue counts the answer that wins)."""
        if self.approvals == "elicitation" and self.approver is None:
            asker.on_answer = self._elicitation_answered
        return asker

    def _elicitation_answered(self, answer: ApprovalAnswer) -> None:
        self.elicited[answer] = self.elicited.get(answer, 0) + 1

    def _approvals_answered(self) -> dict[str, int]:
        """Approvals answered in the console and through elicitation, by answer."""
        counts = dict(self.pending.answered)
        for answer, count in self.elicited.items():
            counts[answer] = counts.get(answer, 0) + count
        return counts

    def use_store(self, store: GatewayStore) -> None:
        """Keep background calls and approvals in ``store`` (before entering the gateway).

        A shared store (replicas) also supplies the key that seals ``requestState`` and the
        one that derives the session of each 2026-07-28 client (its token and profile), so
        that any replica can answer an approval another asked for, and the client's calls
        share one workspace whichever replica serves them (docs/scale-out.md).
        """
        self._store = store
        self._tasks.store = store.tasks
        self._approvals = store.approvals
        self._approvals.ttl_s = self.approval_timeout_s
        self.pending.use_store(
            store.approvals,
            asker=f"{store.replica_id}/{self._boot}",
            gone=self._asker_gone,
            redact=self.redactor.redact_json if self.redactor is not None else None,
        )
        if store.secret is not None:  # replicas share it; the embedded one outlives restarts
            key = store.secret
            boundary = request_state_boundary(
                self._name,
                key=hashlib.sha256(b"request state" + key).digest(),
                ttl_s=self.approval_timeout_s,
            )
            index = self.server.middleware.index(self._state_boundary)
            self.server.middleware[index] = self._state_boundary = boundary
            self._approval_key = hashlib.sha256(b"approval" + key).digest()
            if store.shared:
                self.replica_id = store.replica_id
                self._session_key = hashlib.sha256(b"session" + key).digest()

    async def __aenter__(self) -> Self:
        if self._lifecycle != "new":
            raise RuntimeError(
                f"this gateway is {'already open' if self._lifecycle == 'open' else 'closed'}: "
                "a gateway is entered once ('async with ... as gateway:'); to serve again, "
                "build a new one"
            )
        self._lifecycle = "open"
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._tasks)
            await stack.enter_async_context(self._lifetimes)
            await self.pending.refresh()  # the console's cards a restart left (docs/console.md)
            if self._relay is not None:
                await self._relay.__aenter__()
                # told of no exception, as the relay expects: it only ends its subscriptions
                stack.push_async_callback(self._relay.__aexit__, None, None, None)
            stack.callback(self._listen.close)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, AsyncExitStack()
        self._lifecycle = "closed"
        return bool(await stack.__aexit__(exc_type, exc, tb))

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
        for connection in list(self._connections):
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
                self._connections.discard(connection)
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

    def _profile_for(self, credential: Credential) -> Profile | None:
        if credential.subject is not None:  # an OAuth access token: its scopes choose
            for profile in self.scope_profiles:
                if profile.scopes is not None and profile.scopes <= credential.scopes:
                    return profile
            return self.profile
        if credential.token is not None and credential.token in self.token_profiles:
            return self.token_profiles[credential.token]
        return self.profile

    def _follow_profile(self, session: _ClientSession, profile: Profile | None) -> None:
        """Hold an open session to the configuration as it is now: refused when its profile
        was removed, else under its profile's current version (a reload may have changed
        it)."""
        if session.profile is None or self.configured_profiles is None:
            return
        if session.profile.name not in self.configured_profiles:
            raise MCPError(
                _INVALID_REQUEST,
                f"profile {session.profile.name!r} was removed from the configuration: this "
                "session can make no more requests",
            )
        changed = profile is not None and profile != session.profile
        if changed and profile is not None and profile.name == session.profile.name:
            session.profile = session.offer.profile = profile
            mode = profile.mode if profile.mode is not None else self.mode
            session.mode = session.offer.mode = mode

    def _session_for(self, ctx: ServerRequestContext[Any, Any]) -> _ClientSession:
        credential = request_credential(ctx.request)
        profile = self._profile_for(credential)
        configured = self.configured_profiles
        if configured is not None and profile is not None and profile.name not in configured:
            raise MCPError(  # the profile of --profile, removed by a reload
                _INVALID_REQUEST,
                f"profile {profile.name!r} was removed from the configuration: no request is "
                "served under it",
            )
        mode = profile.mode if profile is not None and profile.mode is not None else self.mode
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            key = f"shared:{credential.identity}:{profile.name if profile else ''}"
            session = self._shared_sessions.get(key)
            if session is None:
                session_id = None
                if self._session_key is not None:  # the same session on every replica
                    digest = hmac.new(self._session_key, key.encode(), hashlib.sha256)
                    session_id = digest.hexdigest()[:32]
                session = self._new_session(ctx, profile, mode, credential, session_id)
                # Over HTTP without a token nothing tells clients apart (over stdio and in
                # memory there is one client).
                session.anonymous = ctx.request is not None and credential.token is None
                session.connectionless = True
                self._shared_sessions[key] = session
            return session
        # The SDK gives handlers no public handle on the per-connection state (ServerRequestContext
        # has none); Connection.state is the documented per-connection scratch space.
        self._connections.add(ctx.session._connection)
        state: dict[str, Any] = ctx.session._connection.state
        found = state.get(_STATE_KEY)
        if isinstance(found, _ClientSession):
            if found.identity != credential.identity:
                # An Mcp-Session-Id is not a credential: a request of another token (or none)
                # must not reach a session, its profile and grants, by knowing its id.
                raise MCPError(_INVALID_REQUEST, "this session belongs to another credential")
            self._follow_profile(found, profile)
            return found
        session = self._new_session(ctx, profile, mode, credential)
        state[_STATE_KEY] = session
        # The connection's teardown (DELETE, transport closed, the SDK's idle expiry) ends
        # the session: what it holds is released (Connection.exit_stack, the SDK's hook).
        ctx.session._connection.exit_stack.callback(self._lifetimes.ended, session.session_id)
        return session

    def _new_session(
        self,
        ctx: ServerRequestContext[Any, Any],
        profile: Profile | None,
        mode: PermissionMode,
        credential: Credential,
        session_id: str | None = None,
    ) -> _ClientSession:
        hidden = (STATUS_TOOL, CANCEL_TOOL) if self.background_after_s is not None else ()
        offer = SessionOffer(
            self.provider, mode=mode, profile=profile, scripts=self.scripts, hidden=hidden
        )
        profile_name = profile.name if profile is not None else ""
        if credential.token is not None:
            owner = f"token:{credential.identity}:{profile_name}"
        elif ctx.request is None:
            owner = f"local:{profile_name}"  # stdio (or in memory): the one client
        else:
            owner = ""
        session = _ClientSession(
            session_id=session_id or uuid.uuid4().hex,
            profile=profile,
            mode=mode,
            identity=credential.identity,
            offer=offer,
            owner=owner,
        )
        self._offers[session.session_id] = offer
        self._sessions[session.session_id] = session
        return session

    def _profile_of(self, ctx: ServerRequestContext[Any, Any]) -> Profile | None:
        return self._session_for(ctx).profile

    def _subscriber_of(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, Profile | None]:
        session = self._session_for(ctx)
        return f"session:{session.session_id}", session.profile

    def session_owner(self, session_id: str) -> str:
        """The identity of the credential that opened a live session ("" without token or
        for an unknown session): who besides the operator may answer its approvals."""
        session = self._sessions.get(session_id)
        return session.identity if session is not None else ""

    @property
    def tasks(self) -> GatewayTasks:
        """The background calls of every session (the web console lists and cancels them)."""
        return self._tasks

    def session_offer(self, session_id: str) -> SessionOffer | None:
        """The offer of the session ``session_id`` (as a call's ``SessionContext`` names it).

        The skills layer narrows it to a loaded skill's ``allowed-tools``.
        """
        return self._offers.get(session_id)

    def adopt_offer(self, session_id: str, offer: SessionOffer) -> None:
        """Make ``offer`` the offer of ``session_id``, a session the gateway did not open
        itself (a thread of the console's Chat page), so that the tools that read a session's
        offer (the skill tools: its profile's skills) read this one. Kept weakly: the caller
        holds it for as long as the session runs."""
        self._offers[session_id] = offer

    def session_call(self, session_id: str) -> AbstractContextManager[None]:
        """Mark a call of ``session_id``, a session the gateway did not open itself (a Chat
        page thread's script session), in flight while inside: nothing ends such a session,
        so what it holds (its sandboxes and run_script host) is released once it has been
        idle for ``sessionIdleTimeout``, as a connectionless client session's is
        (:mod:`sagents.gateway._lifetime`); its next call starts them again."""
        return self._lifetimes.in_use(session_id, connectionless=True)

    async def _on_set_logging_level(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SetLevelRequestParams
    ) -> mt.EmptyResult:
        """``logging/setLevel``: log messages of this session below ``level`` are not sent."""
        session = self._session_for(ctx)
        session.log_level = params.level
        session.logs_requested = True
        return mt.EmptyResult()

    # tools/list --------------------------------------------------------------------------------

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        session = self._session_for(ctx)
        await self._announce_restart(ctx, session)
        # sorted by name, run_script last: the same set lists the same way, whatever order
        # the upstreams became ready in (2026-07-28, "Tools": deterministic order)
        specs = sorted(session.offer.list_specs(), key=_list_order)
        if self.tool_search is not None:
            specs = self.tool_search.listed(self._search_state(session), specs)
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

    # tools/call --------------------------------------------------------------------------------

    async def _counted_call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        """``tools/call``, counted where its answer is known (docs/observability.md)."""

        def server() -> str | None:
            try:
                spec = self._session_for(ctx).offer.get(params.name)
            except MCPError:  # its profile was removed during the call: the answer stands
                return None
            return spec.source.server if spec is not None else None

        # the gateway's attributes go on the MCP SDK's server span ("tools/call NAME"), a
        # child of the client's traceparent when one came (docs/observability.md, "Traces")
        current = server_span(params.arguments)
        result = await self.metrics.counting(
            self._on_call_tool(ctx, params), tool=params.name, server=server
        )
        if current is not None and isinstance(result, mt.CallToolResult):
            end_call_span(current, server() or "", result)
        return result

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        session = self._session_for(ctx)
        with self._lifetimes.in_use(session.session_id, connectionless=session.connectionless):
            result = await self._call_tool(ctx, session, params)
        if self.redactor and isinstance(result, mt.CallToolResult):
            return redact_call_tool_result(result, self.redactor)
        return result

    async def _call_tool(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: _ClientSession,
        params: mt.CallToolRequestParams,
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        await self._announce_restart(ctx, session)
        arguments: dict[str, Any] = dict(params.arguments or {})
        if self.background_after_s is not None and params.name in (STATUS_TOOL, CANCEL_TOOL):
            return to_call_tool_result(
                await self._tasks.tool(session.scope, params.name, arguments)
            )
        if self.tool_search is not None and self.tool_search.is_own(params.name):
            return to_call_tool_result(
                await self._search_call(ctx, session, params.name, arguments)
            )
        spec = session.offer.get(params.name)
        if spec is None:
            error = UnknownToolError(
                f"no tool {params.name!r} is offered to this session",
                hint="call tools/list for the tools this session may call",
                details={"tool": params.name},
            )
            return to_call_tool_result(ToolResult.from_exception(error))
        try:
            check_servable(spec)  # a tool withheld from tools/list is not callable either
        except UpstreamSchemaError as schema_error:
            return to_call_tool_result(ToolResult.from_exception(schema_error))
        if self.tool_search is not None:  # offered but not listed: expand it first
            refusal = self.tool_search.refusal(self._search_state(session), spec.name)
            if refusal is not None:
                return to_call_tool_result(refusal)
        try:
            decision = await self._decide(ctx, params, session, spec, arguments)
        except StoreError as error:  # grants and approval nonces live in the store: not run
            logger.warning("call of %r refused, its approval needs the store: %s", spec.name, error)
            return to_call_tool_result(ToolResult.from_exception(error))
        if not isinstance(decision, Decision):
            return decision  # a refusal, or an InputRequiredResult asking a 2026-07-28 client
        return to_call_tool_result(await self._run(ctx, session, spec, arguments, decision))

    async def _decide(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        session: _ClientSession,
        spec: ToolSpec,
        arguments: dict[str, Any],
    ) -> Decision | mt.CallToolResult | mt.InputRequiredResult:
        """The one policy step of a call (docs/architecture.md, "The decision"): the
        :class:`Decision` that travels with it, asking the user first when the session's mode
        says so; a refused or denied direct call is its result here. A run_script's decision,
        denied ones too, goes to its run (whose summary and records say why nothing ran).

        Raises:
            StoreError: the session's grants or the approval's ``requestState`` could not be
                read or written (the call is then refused, and a nonce is not spent).
        """
        # grants are kept in the store: replicas share them (docs/scale-out.md)
        granted = (
            frozenset()
            if spec.permission == "read_only" and spec.name != RUN_SCRIPT_TOOL_NAME
            else await self._approvals.granted(session.session_id)
        )
        script = spec.name == RUN_SCRIPT_TOOL_NAME and self.scripts is not None
        try:
            if script:
                request, covered = session.offer.script_approval(
                    arguments,
                    granted=granted,
                    session_id=session.session_id,
                    preflight=self.script_preflight,
                )
            else:
                covered = frozenset({spec.name})
                request = approval_needed(
                    spec, arguments, mode=session.mode, session_id=session.session_id,
                    granted=granted,
                )  # fmt: skip
        except NotAllowedError as refused:  # not offered either: a tool the filter let through
            return to_call_tool_result(ToolResult.from_exception(refused))
        if request is None:  # nothing to ask: the mode, or a grant this or another replica kept
            kind: DecisionKind = "approved_session" if covered & granted else "allowed"
            return Decision(kind=kind, tools=covered)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and request.rememberable:
            # one session per token: a grant must not leak to another client
            request = replace(request, offered=("allow_once", "deny"))
        try:
            asked = await self._approval(ctx, params, request)
        except NotAllowedError as unshowable:  # too long to be shown whole where it was asked
            if script:
                return Decision(kind="denied", tools=covered, reason=unshowable.message)
            return to_call_tool_result(ToolResult.from_exception(unshowable))
        if isinstance(asked, mt.InputRequiredResult):
            return asked
        if script:
            reason = denial_text(request, asked=asked is not None)
            return Decision.from_answer(asked or "deny", covered, reason=reason)
        if asked is None:
            return to_call_tool_result(_refused(request))
        if asked == "deny":
            return to_call_tool_result(_denied(request))
        if asked == "allow_session":
            await self._approvals.grant(session.session_id, spec.name)
        return Decision.from_answer(asked, covered)

    def _search_state(self, session: _ClientSession) -> SearchState:
        """The session's tool search; refused for a session nothing identifies."""
        if session.anonymous:
            raise MCPError(
                _INVALID_REQUEST,
                "tool search keeps the expanded tools per client, and this request carries no "
                "identity: send a bearer token (SAGENTS_GATEWAY_TOKEN), or use a session",
            )
        return session.search

    async def _search_call(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: _ClientSession,
        name: str,
        arguments: dict[str, Any],
    ) -> ToolResult:
        """``search_tools`` / ``tool_expand_tools``; after an expansion the client is told that
        its list changed (handshake-era connections; others see it on their next list)."""
        assert self.tool_search is not None
        state = self._search_state(session)
        result, changed = await self.tool_search.call(
            state, name, arguments, session.offer.list_specs()
        )
        if changed and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            try:
                await ctx.session.send_tool_list_changed()
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not tell the client its tools changed: %s", error)
        return result

    async def _approval(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        request: ApprovalRequest,
    ) -> ApprovalAnswer | mt.InputRequiredResult | None:
        """The answer; an ``InputRequiredResult`` to ask a 2026-07-28 client; None to refuse."""
        if self.approver is not None:
            return settle_answer(request, await self.approver.approve(request))
        can_elicit = ctx.session.check_client_capability(
            mt.ClientCapabilities(elicitation=mt.ElicitationCapability())
        )
        if self.approvals != "elicitation":
            return await self._console_approval(ctx, params, request, can_elicit=can_elicit)
        if not can_elicit:
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            response = (params.input_responses or {}).get(APPROVAL_INPUT_KEY)
            tool, arguments = params.name, dict(params.arguments or {})  # bound to this call
            owner = self._approval_owner(ctx)
            if isinstance(response, mt.ElicitResult) and await self._approvals.redeem(
                params.request_state, owner, tool, arguments
            ):
                if request.kind == "script" and await self._asked_before_restart(
                    params.request_state
                ):
                    raise NotAllowedError(ABORTED_WAITING, details={"reason": RESTART_REASON})
                answer = answer_from_elicitation(response, request)
                self._elicitation_answered(answer)
                return answer
            issued = json.loads(await self._approvals.issue(owner, tool, arguments))
            state = json.dumps({**issued, "replica": self.replica_id, "boot": self._boot})
            message, schema = approval_form(request)
            elicit = mt.ElicitRequest(
                params=mt.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
            return mt.InputRequiredResult(
                input_requests={APPROVAL_INPUT_KEY: elicit}, request_state=state
            )
        try:
            return await ElicitationApprover(self._client_asker(ctx)).approve(request)
        except NoBackChannelError:
            return None  # this connection cannot carry a server-to-client request

    def _approval_owner(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """What a 2026-07-28 approval is bound to: the client's session; with a store key
        (one that outlives the process, or that replicas share) the token and profile that
        session stands for, so that the answer may reach another process (a restarted one
        draws new session ids)."""
        session = self._session_for(ctx)
        if self._approval_key is None:
            return session.session_id
        name = f"{session.identity}:{session.profile.name if session.profile else ''}"
        return hmac.new(self._approval_key, name.encode(), hashlib.sha256).hexdigest()[:32]

    async def _asked_before_restart(self, state: str | None) -> bool:
        """Whether the (sealed, so genuine) ``requestState`` was issued by a gateway process
        that is gone: an earlier process of this one (a restart), or a replica whose lease ran
        out. run_script's rule is that such a run is aborted, never resumed
        (docs/run_script.md); an approval a live replica asked may be answered here."""
        try:
            issued = json.loads(state or "")
        except ValueError:
            return False
        if not isinstance(issued, dict) or issued.get("boot") == self._boot:
            return False
        replica = issued.get("replica")
        if self._store is None or replica is None or replica == self.replica_id:
            return True
        return not await self._store.replica_alive(str(replica))

    async def _asker_gone(self, asker: str) -> bool:
        """Whether the gateway process ``asker`` (``<replica id>/<boot id>``) that held a
        console approval is gone: an earlier process of this one, or a replica whose lease
        ran out."""
        replica, _, boot = asker.partition("/")
        if boot == self._boot:
            return False
        if self._store is None or replica == self._store.replica_id:
            return True
        return not await self._store.replica_alive(replica)

    async def _console_approval(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        request: ApprovalRequest,
        *,
        can_elicit: bool,
    ) -> ApprovalAnswer:
        """Ask the console (and, with ``both``, a client that can be asked mid-call).

        A 2026-07-28 client's direct call is bound to the client (its token and profile) and
        the call: sent again after a restart, it takes the answer the console gave to the
        restored card (once), or waits on that card (docs/console.md, "Approvals").

        Raises:
            StoreError: the recorded answer could not be read (the call is refused).
        """
        binding = call = ""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and request.kind != "script":
            binding = self._approval_owner(ctx)
            arguments = dict(params.arguments or {})
            call = call_digest(params.name, arguments)
            recorded = await self._approvals.take(binding, params.name, arguments)
            if recorded is not None:
                return settle_answer(request, recorded)
        owner = request_credential(ctx.request).identity
        client = None
        if (
            self.approvals == "both"
            and can_elicit
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):

            async def client() -> ApprovalAnswer | None:
                try:
                    return await ElicitationApprover(self._client_asker(ctx)).approve(request)
                except (NoBackChannelError, NotAllowedError):  # NotAllowed: too long to show
                    return None

        return await self.pending.ask(
            PendingApproval.for_request(request, owner=owner),
            client=client,
            binding=binding,
            call=call,
        )

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: _ClientSession,
        spec: ToolSpec,
        arguments: dict[str, Any],
        decision: Decision,
    ) -> ToolResult:
        """Run the call with its progress forwarded; hand it off after ``background_after_s``.

        ``decision`` (:meth:`_decide`) travels with the call in its ``SessionContext``: the
        session's ``ToolProxy`` and run_script's pre-run check hold the call to it and never
        decide again.
        """
        name = spec.name
        tool_call_id = f"call_{os.urandom(8).hex()}"
        workspace = self.workspace
        if isinstance(workspace, Workspaces):
            # created on the first call that runs here (docs/gateway.md, "Sessions and
            # workspaces"): an upstream MCP tool never uses the session's folder
            if spec.source.kind != "mcp" or name == RUN_SCRIPT_TOOL_NAME:
                workspace = str(workspace.for_session(session.session_id))
            else:
                if session.workspace_path is None:
                    session.workspace_path = str(workspace.path_for(session.session_id))
                workspace = session.workspace_path
        task_request = TASK_REQUEST.get()  # a Tasks client: the call may become a task
        asker, task_input = (
            self._task_ext.asker(ctx)
            if task_request is not None
            else (self._client_asker(ctx), None)
        )
        self._counting(asker)
        context = SessionContext(
            session_id=session.session_id,
            workspace=workspace,
            permission_mode=session.mode,
            trusted={PRINCIPAL_KEY: session.identity},  # whose quota it uses (quotas)
            decision=decision,
            questioner=ElicitationQuestioner(asker),  # the questionnaire tool asks the client
        )
        request = ToolRequest(
            name=name, arguments=arguments, session_context=context, tool_call_id=tool_call_id
        )

        server = spec.source.server or name

        async def call() -> ToolResult:
            token = CLIENT_ASKER.set(asker)
            # an upstream task's own questions go to this call's client
            input_token = TASK_INPUT.set(ForwardedTaskInput(asker, server))
            try:
                # A failed call is already its result (ToolManager.run_tool, the one boundary);
                # a provider that raises broke its contract, and the SDK answers the request
                # with a JSON-RPC internal error.
                result = await session.offer.call(request)
                # before a background call's store, and the console, keep it
                return self.redactor.result(result) if self.redactor else result
            finally:
                TASK_INPUT.reset(input_token)
                CLIENT_ASKER.reset(token)

        async def run() -> ToolResult:
            hand_off_after = self.background_after_s
            if task_request is not None and name == RUN_SCRIPT_TOOL_NAME:
                hand_off_after = 0.0  # a run_script of a Tasks client is a task
            # a Tasks client's call becomes a task early when it asks for input
            early = task_input.hand_off if task_input is not None else None
            if (hand_off_after is None and early is None) or _asks_the_user(spec):
                return await call()
            task_id = await self._tasks.start(session.session_id, name, call)
            done = await self._tasks.wait(
                task_id,
                hand_off_after=hand_off_after,
                on_done=self._notifier(ctx),
                hand_off_now=early,
            )
            if done is None:
                refused = await self._tasks.handed_off(session.scope, task_id, name)
                if refused is not None:  # not recorded, so stopped (docs/scale-out.md)
                    return refused
                if task_request is not None and task_input is not None:
                    self._task_ext.created(task_request, task_id, task_input)
            return done if done is not None else handed_off_result(name, task_id)

        if self.progress is None or not _progress_wanted(ctx, session, spec):
            # Nobody would see the call's progress: no subscription, so the provider's call
            # is not listened to either (an upstream is then not asked for progress).
            return await run()
        forwarder = ProgressForwarder(ctx, log_level=session.log_level)
        events: MemoryObjectReceiveStream[object] | None = None
        stop = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                events = await tg.start(self._subscribe, session.session_id, tool_call_id, stop)
                tg.start_soon(forwarder.forward, events)
                try:
                    result = await run()
                finally:
                    # Ending the subscription ends the forwarder once it has sent what was
                    # emitted (cancelling it could lose an event it is in the middle of sending).
                    stop.set()
            if events is not None:
                await forwarder.drain(events)  # before the result: nothing is sent after it
        finally:
            if events is not None:
                events.close()
        return result

    async def _subscribe(
        self,
        session_id: str,
        tool_call_id: str,
        stop: anyio.Event,
        *,
        task_status: anyio.abc.TaskStatus[MemoryObjectReceiveStream[object]],
    ) -> None:
        assert self.progress is not None
        async with self.progress.subscribe(session_id, tool_call_id) as events:
            task_status.started(events.clone())
            await stop.wait()

    def _notifier(self, ctx: ServerRequestContext[Any, Any]) -> Any:
        connection = ctx.session._connection  # see _session_for: the standalone channel

        async def on_done(info: TaskInfo) -> None:
            await self._tasks.finished(info)
            self._task_ext.finished(info)
            await self._changes.publish(ResourcesListChanged())  # 2026-07-28 listeners
            try:
                await connection.send_resource_list_changed()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await connection.log(
                        "info",
                        {
                            "event": "background.done",
                            "task_id": info.task_id,
                            "tool": info.tool,
                            "status": info.status,
                            "uri": TASK_URI_PREFIX + info.task_id,
                        },
                        logger="sagents.gateway",
                    )
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not notify the client of task %s: %s", info.task_id, error)

        return on_done

    # Background tasks: announcements and resources ------------------------------------------

    async def _announce_restart(
        self, ctx: ServerRequestContext[Any, Any], session: _ClientSession
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

    def offered_skills(self, profile: Profile | None) -> frozenset[str] | None:
        """The skill names a session of ``profile`` is offered (None: every skill)."""
        return profile.skills if profile is not None else None

    async def _on_list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        session = self._session_for(ctx)
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
        session = self._session_for(ctx)
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


def _denied(request: ApprovalRequest) -> ToolResult:
    return ToolResult.from_exception(
        ApprovalDeniedError(
            f"the call of {request.tools[0]!r} was not approved",
            hint=(
                "the user did not approve it (declined, cancelled or no answer in time); "
                "do not retry the same call without asking the user"
            ),
            details={"tool": request.tools[0]},
        )
    )


def _progress_wanted(
    ctx: ServerRequestContext[Any, Any], session: _ClientSession, spec: ToolSpec
) -> bool:
    """Whether the call's progress is subscribed to (docs/gateway.md, "Progress").

    The gateway's own tools (``run_script``, built-ins, local tools) report in process, so
    their progress is always followed. A forwarded upstream tool is followed only when the
    client would see it (:func:`~sagents.gateway._progress.progress_listened`): otherwise the
    upstream is not asked for progress at all, which keeps the forwarded call at its cost.
    """
    if spec.source.kind != "mcp":
        return True
    return progress_listened(ctx, logs_requested=session.logs_requested)


def _asks_the_user(spec: ToolSpec) -> bool:
    """The built-in ``questionnaire`` waits for the user through this very request (an
    elicitation): it is never handed off to the background."""
    return spec.source.kind == "builtin" and spec.name == "questionnaire"


ABORTED_WAITING = (
    f"aborted: {RESTART_REASON} while this run waited for its approval; nothing of it ran. "
    "Call run_script again to ask again"
)
"""The refusal of a run_script whose approval was answered after a restart (runs are never
resumed, docs/run_script.md)."""


def _refused(request: ApprovalRequest) -> ToolResult:
    return ToolResult.from_exception(
        NotAllowedError(refusal_text(request), details={"tool": request.tools[0]})
    )


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

"""The gateway's client sessions: which session a request belongs to, and what it is offered
(docs/gateway.md, "Sessions and workspaces", "Threat model").

Session identity: a handshake-era connection (stdio; HTTP with ``Mcp-Session-Id``) is one session,
bound to the credential it was opened with (a request of another token is refused). A 2026-07-28
connection is one request and carries no client identity, so those requests share one session
per (bearer token, profile): "allow for this session" is not offered to them (a grant must not
leak to another client), and their background calls are scoped to the token. Without a token
(HTTP on loopback) nothing tells clients apart: their background calls are never listed, each is
reached only through its unguessable handle, which only its starter received. What each client
is offered is that session's :class:`~sagents.gateway._offer.SessionOffer`.

:class:`ServingRules` are the configuration's rules as they are now (a reload changes them in
place); :class:`GatewaySessions` finds or opens the :class:`GatewaySession` of each request
under them.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as mt
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.core._permissions import PermissionMode
from sagents.gateway._http_security import Credential, request_credential
from sagents.gateway._offer import ScriptHost, SessionOffer
from sagents.gateway._policy import Profile
from sagents.gateway._tasks import TaskScope
from sagents.gateway._tool_search import SearchState
from sagents.tool._background import CANCEL_TOOL, STATUS_TOOL
from sagents.tool._provider import ToolProvider

__all__ = [
    "INVALID_REQUEST",
    "GatewaySession",
    "GatewaySessions",
    "ServingRules",
    "request_connection",
]

INVALID_REQUEST = -32600  # JSON-RPC 2.0, "Error object"
_STATE_KEY = "sagents.gateway.session"


@dataclass(kw_only=True)
class ServingRules:
    """The rules a request is served under, read at each request: a reload of the
    configuration (:mod:`sagents.gateway._reload`) changes them in place, through the
    gateway's attributes of the same names."""

    mode: PermissionMode = "ask"
    """Default permission mode of sessions (a profile's mode wins)."""
    profile: Profile | None = None
    """Profile of sessions that carry no bearer token bound to another one."""
    token_profiles: dict[str, Profile] = field(default_factory=dict)
    scope_profiles: tuple[Profile, ...] = ()
    configured_profiles: frozenset[str] | None = None
    """The profile names the configuration holds now, once it was reloaded: a session whose
    profile is not among them is refused. None: never reloaded, nothing to check."""
    background_after_s: float | None = None
    """Seconds after which a call becomes a background call; None never."""


@dataclass(kw_only=True)
class GatewaySession:
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

    def search_state(self) -> SearchState:
        """The session's tool search; refused for a session nothing identifies.

        Raises:
            MCPError: the session is anonymous (no token on a 2026-07-28 connection).
        """
        if self.anonymous:
            raise MCPError(
                INVALID_REQUEST,
                "tool search keeps the expanded tools per client, and this request carries no "
                "identity: send a bearer token (SAGENTS_GATEWAY_TOKEN), or use a session",
            )
        return self.search


class GatewaySessions:
    """The sessions of one gateway: found or opened for each request.

    Args:
        rules: The rules in force (shared with the gateway, changed by a reload).
        provider: The gateway's shared provider, which each session's offer filters.
        scripts: The run_script host the offers name, or None.
        ended: Told the id of each handshake-era session whose connection closed (what it
            holds is released).
        session_key: Derives the id of each 2026-07-28 session from its token and profile, so
            that every replica of a shared store gives it the same one; None draws them.
    """

    def __init__(
        self,
        rules: ServingRules,
        provider: ToolProvider,
        *,
        scripts: ScriptHost | None,
        ended: Callable[[str], object],
        session_key: bytes | None = None,
    ) -> None:
        self._rules = rules
        self._provider = provider
        self._scripts = scripts
        self._ended = ended
        self._session_key = session_key
        self._shared: dict[str, GatewaySession] = {}
        self._live: weakref.WeakValueDictionary[str, GatewaySession] = weakref.WeakValueDictionary()
        self._offers: weakref.WeakValueDictionary[str, SessionOffer] = weakref.WeakValueDictionary()
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()

    def __len__(self) -> int:
        """How many sessions are open."""
        return len(self._live)

    def connections(self) -> list[Connection]:
        """The handshake-era connections seen so far that are still open (list changes are
        sent to them)."""
        return list(self._connections)

    def forget_connection(self, connection: Connection) -> None:
        """Stop sending to ``connection`` (a send to it failed)."""
        self._connections.discard(connection)

    def for_request(self, ctx: ServerRequestContext[Any, Any]) -> GatewaySession:
        """The session of the request ``ctx``, opened on its first request.

        Raises:
            MCPError: the request's profile was removed by a reload, or a handshake-era
                session is reached with another credential than the one that opened it.
        """
        rules = self._rules
        credential = request_credential(ctx.request)
        profile = self._profile_for(credential)
        configured = rules.configured_profiles
        if configured is not None and profile is not None and profile.name not in configured:
            raise MCPError(  # the profile of --profile, removed by a reload
                INVALID_REQUEST,
                f"profile {profile.name!r} was removed from the configuration: no request is "
                "served under it",
            )
        mode = profile.mode if profile is not None and profile.mode is not None else rules.mode
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            key = f"shared:{credential.identity}:{profile.name if profile else ''}"
            session = self._shared.get(key)
            if session is None:
                session_id = None
                if self._session_key is not None:  # the same session on every replica
                    digest = hmac.new(self._session_key, key.encode(), hashlib.sha256)
                    session_id = digest.hexdigest()[:32]
                session = self._open(ctx, profile, mode, credential, session_id)
                # Over HTTP without a token nothing tells clients apart (over stdio and in
                # memory there is one client).
                session.anonymous = ctx.request is not None and credential.token is None
                session.connectionless = True
                self._shared[key] = session
            return session
        # Connection.state is the SDK's per-connection scratch space.
        connection = request_connection(ctx)
        self._connections.add(connection)
        state = connection.state
        found = state.get(_STATE_KEY)
        if isinstance(found, GatewaySession):
            if found.identity != credential.identity:
                # An Mcp-Session-Id is not a credential: a request of another token (or none)
                # must not reach a session, its profile and grants, by knowing its id.
                raise MCPError(INVALID_REQUEST, "this session belongs to another credential")
            self._follow_profile(found, profile)
            return found
        session = self._open(ctx, profile, mode, credential)
        state[_STATE_KEY] = session
        # The connection's teardown (DELETE, transport closed, the SDK's idle expiry) ends
        # the session: what it holds is released (Connection.exit_stack, the SDK's hook).
        connection.exit_stack.callback(self._ended, session.session_id)
        return session

    def profile_of(self, ctx: ServerRequestContext[Any, Any]) -> Profile | None:
        """The profile of the request's session."""
        return self.for_request(ctx).profile

    def subscriber_of(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, Profile | None]:
        """Who subscribes to resources for this request: its session, and the profile."""
        session = self.for_request(ctx)
        return f"session:{session.session_id}", session.profile

    def identity_of(self, session_id: str) -> str:
        """The identity of the credential that opened a live session ("" without token or
        for an unknown session)."""
        session = self._live.get(session_id)
        return session.identity if session is not None else ""

    def offer(self, session_id: str) -> SessionOffer | None:
        """The offer of the session ``session_id``, or None."""
        return self._offers.get(session_id)

    def adopt_offer(self, session_id: str, offer: SessionOffer) -> None:
        """Make ``offer`` the offer of ``session_id`` (kept weakly)."""
        self._offers[session_id] = offer

    def _profile_for(self, credential: Credential) -> Profile | None:
        rules = self._rules
        if credential.subject is not None:  # an OAuth access token: its scopes choose
            for profile in rules.scope_profiles:
                if profile.scopes is not None and profile.scopes <= credential.scopes:
                    return profile
            return rules.profile
        if credential.token is not None and credential.token in rules.token_profiles:
            return rules.token_profiles[credential.token]
        return rules.profile

    def _follow_profile(self, session: GatewaySession, profile: Profile | None) -> None:
        """Hold an open session to the configuration as it is now: refused when its profile
        was removed, else under its profile's current version (a reload may have changed
        it)."""
        configured = self._rules.configured_profiles
        if session.profile is None or configured is None:
            return
        if session.profile.name not in configured:
            raise MCPError(
                INVALID_REQUEST,
                f"profile {session.profile.name!r} was removed from the configuration: this "
                "session can make no more requests",
            )
        changed = profile is not None and profile != session.profile
        if changed and profile is not None and profile.name == session.profile.name:
            session.profile = session.offer.profile = profile
            mode = profile.mode if profile.mode is not None else self._rules.mode
            session.mode = session.offer.mode = mode

    def _open(
        self,
        ctx: ServerRequestContext[Any, Any],
        profile: Profile | None,
        mode: PermissionMode,
        credential: Credential,
        session_id: str | None = None,
    ) -> GatewaySession:
        background = self._rules.background_after_s is not None
        hidden = (STATUS_TOOL, CANCEL_TOOL) if background else ()
        offer = SessionOffer(
            self._provider, mode=mode, profile=profile, scripts=self._scripts, hidden=hidden
        )
        profile_name = profile.name if profile is not None else ""
        if credential.token is not None:
            owner = f"token:{credential.identity}:{profile_name}"
        elif ctx.request is None:
            owner = f"local:{profile_name}"  # stdio (or in memory): the one client
        else:
            owner = ""
        session = GatewaySession(
            session_id=session_id or uuid.uuid4().hex,
            profile=profile,
            mode=mode,
            identity=credential.identity,
            offer=offer,
            owner=owner,
        )
        self._offers[session.session_id] = offer
        self._live[session.session_id] = session
        return session


def request_connection(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The MCP connection the request ``ctx`` came on: its per-connection ``state`` and
    ``exit_stack`` (the SDK's teardown hook), and its standalone channel, which still carries a
    notification after the request ended (a background call's completion, a list change, a
    resource update).

    This is the gateway's one reach into the SDK's private state, and there is no public way
    around it in mcp 2.3: low-level handlers get a ``ServerRequestContext``, whose
    ``ServerSession`` keeps the ``Connection`` private (``ServerSession._connection``); the
    public property, ``mcp.server.context.Context.connection``, belongs to a context the SDK's
    ``ServerRunner`` does not build yet (its docstring: "Not currently constructed by
    ``ServerRunner``"). The per-request ``ServerSession`` cannot stand in: it is new for every
    request, so it neither keys per-connection state nor lives as long as the connection.
    Everything used of the ``Connection`` itself is public.
    """
    return ctx.session._connection  # private: see above (no public handle in the SDK)

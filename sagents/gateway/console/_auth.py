"""Who is looking at the console: the token asked once, kept behind a cookie; CSRF tokens.

A browser cannot send ``Authorization: Bearer`` on a page load, so the console asks for the
token once (the login page), checks it against the gateway's tokens in constant time and keeps
the result server-side, behind a random session cookie (``HttpOnly``, ``SameSite=Strict``,
``Path=/console/``, ``Secure`` over TLS or behind a TLS-terminating proxy). The token itself
never reaches the browser's storage. Every state-changing request carries the session's CSRF
token (a form field or the ``X-CSRF-Token`` header), compared in constant time.

Principals: the operator (the gateway's own token, or anyone on a loopback gateway without
tokens) sees and answers everything; a profile's token sees only the sessions it opened.
"""

from __future__ import annotations

import hmac
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from sagents.gateway._http_security import Credential

__all__ = ["COOKIE_NAME", "ConsoleAuth", "ConsoleSession", "Principal"]

COOKIE_NAME = "sagents_console"
MAX_SESSIONS = 1000  # console logins kept, the least recently used dropped first
MAX_ANONYMOUS = 1000  # sessions not logged in yet (a login form shown), kept apart


@dataclass(frozen=True, kw_only=True)
class Principal:
    """Who a console session belongs to.

    Attributes:
        operator: May see and answer every session's runs and approvals.
        identity: The token's identity (as the gateway names sessions' credentials).
    """

    operator: bool
    identity: str = ""

    def may_see(self, owner: str) -> bool:
        """Whether this principal may see (and answer for) a session whose credential is
        ``owner``."""
        return self.operator or (bool(self.identity) and owner == self.identity)


@dataclass(kw_only=True)
class ConsoleSession:
    """One browser's console session."""

    sid: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    principal: Principal | None = None


class ConsoleAuth:
    """Console sessions and the tokens that open them.

    Args:
        operator_tokens: Tokens that make their holder the operator.
        session_tokens: Other accepted tokens (profiles' tokens): their holder sees only the
            sessions opened with them.
    """

    def __init__(self, *, operator_tokens: Sequence[str], session_tokens: Sequence[str]) -> None:
        self._operator = [t.encode() for t in operator_tokens if t]
        self._others = [t.encode() for t in session_tokens if t]
        self._sessions: OrderedDict[str, ConsoleSession] = OrderedDict()
        # Anyone who reaches the port gets one of these with each cookieless request: they are
        # kept apart, so that no number of them can push a logged-in session out.
        self._anonymous: OrderedDict[str, ConsoleSession] = OrderedDict()

    @property
    def open(self) -> bool:
        """No token is configured: everyone who reaches the console is the operator."""
        return not self._operator and not self._others

    def session(self, sid: str | None) -> ConsoleSession | None:
        """The session behind a cookie value, or None."""
        if not sid:
            return None
        for pool in (self._sessions, self._anonymous):
            found = pool.get(sid)
            if found is not None:
                pool.move_to_end(sid)
                return found
        return None

    def new_session(self, principal: Principal | None = None) -> ConsoleSession:
        """A new session (a new cookie value), logged in as ``principal`` when given."""
        if principal is None and self.open:
            principal = Principal(operator=True)
        session = ConsoleSession(sid=secrets.token_urlsafe(32), principal=principal)
        pool, limit = (
            (self._anonymous, MAX_ANONYMOUS)
            if principal is None
            else (self._sessions, MAX_SESSIONS)
        )
        pool[session.sid] = session
        while len(pool) > limit:
            pool.popitem(last=False)
        return session

    def drop(self, sid: str) -> None:
        """Forget a session (logout)."""
        self._sessions.pop(sid, None)
        self._anonymous.pop(sid, None)

    def principal_for(self, token: str) -> Principal | None:
        """The principal of a token, or None when it is not accepted (constant time)."""
        given = token.encode()
        operator = any(hmac.compare_digest(given, t) for t in self._operator)
        other = any(hmac.compare_digest(given, t) for t in self._others)
        if operator:
            return Principal(operator=True, identity=Credential(token).identity)
        if other:
            return Principal(operator=False, identity=Credential(token).identity)
        return None

    @staticmethod
    def csrf_ok(session: ConsoleSession, given: str | None) -> bool:
        """Whether ``given`` is the session's CSRF token."""
        return given is not None and hmac.compare_digest(given.encode(), session.csrf.encode())

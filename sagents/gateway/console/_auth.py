"""Who is looking at the console: a login kept behind a cookie; CSRF tokens.

A browser cannot send ``Authorization: Bearer`` on a page load, so a browser logs in once
(the login URL's ``?token=``, or the login form), the token is checked
(:class:`~sagents.gateway._web_auth.WebAuth`) and the result kept server-side, behind a random
session cookie (``HttpOnly``, ``SameSite=Strict``, ``Path=/console/``, ``Secure`` over TLS or
behind a TLS-terminating proxy). The token itself never reaches the browser's storage. Every
state-changing request carries the session's CSRF token (a form field or the ``X-CSRF-Token``
header), compared in constant time.

Nobody is the operator for reaching the port: a session without a login is nobody. Closing a
session (logout, or eviction when :data:`MAX_SESSIONS` are kept, or
:data:`MAX_SESSIONS_PER_PRINCIPAL` of its principal) closes its event streams (``on_close``).
"""

from __future__ import annotations

import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from sagents.gateway._web_auth import Principal
from sagents.store._fair import FairMap

__all__ = ["COOKIE_NAME", "ConsoleAuth", "ConsoleSession", "Principal"]

COOKIE_NAME = "sagents_console"
MAX_SESSIONS = 1000  # console logins kept, the least recently used dropped first
MAX_SESSIONS_PER_PRINCIPAL = 100  # of those, one principal's: its own oldest go first
MAX_ANONYMOUS = 1000  # sessions not logged in yet (a login form shown), kept apart


@dataclass(kw_only=True)
class ConsoleSession:
    """One browser's console session.

    Attributes:
        closed: Logged out or evicted: it answers nothing any more, its streams end.
    """

    sid: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    principal: Principal | None = None
    closed: bool = False


class ConsoleAuth:
    """Console sessions.

    Args:
        on_close: Told the id of each logged-in session that ends (logout or eviction); must
            not block.
    """

    def __init__(self, *, on_close: Callable[[str], None] | None = None) -> None:
        self._on_close = on_close
        # Logged-in sessions, bounded per principal: no number of logins with a profile's token
        # can push the operator's session out.
        self._sessions: FairMap[str, ConsoleSession] = FairMap(
            limit=MAX_SESSIONS, per_owner=MAX_SESSIONS_PER_PRINCIPAL
        )
        # Anyone who reaches the port gets one of these with each cookieless request: they are
        # kept apart, so that no number of them can push a logged-in session out.
        self._anonymous: OrderedDict[str, ConsoleSession] = OrderedDict()

    def session(self, sid: str | None) -> ConsoleSession | None:
        """The session behind a cookie value, or None."""
        if not sid:
            return None
        found = self._sessions.get(sid)
        if found is not None:
            self._sessions.touch(sid)
            return found
        found = self._anonymous.get(sid)
        if found is not None:
            self._anonymous.move_to_end(sid)
        return found

    def new_session(self, principal: Principal | None = None) -> ConsoleSession:
        """A new session (a new cookie value), logged in as ``principal`` when given."""
        session = ConsoleSession(sid=secrets.token_urlsafe(32), principal=principal)
        if principal is None:
            self._anonymous[session.sid] = session
            while len(self._anonymous) > MAX_ANONYMOUS:
                self._anonymous.popitem(last=False)
        else:
            for evicted in self._sessions.put(session.sid, session, principal.identity):
                self._close(evicted)
        return session

    def drop(self, sid: str) -> None:
        """Forget a session (logout); its streams end."""
        for found in (self._sessions.pop(sid), self._anonymous.pop(sid, None)):
            if found is not None:
                self._close(found)

    def _close(self, session: ConsoleSession) -> None:
        session.closed = True
        if self._on_close is not None and session.principal is not None:
            self._on_close(session.sid)

    @staticmethod
    def csrf_ok(session: ConsoleSession, given: str | None) -> bool:
        """Whether ``given`` is the session's CSRF token."""
        return given is not None and hmac.compare_digest(given.encode(), session.csrf.encode())

"""Who calls an HTTP surface of the gateway: the one rule every web route follows.

Nothing that can only reach the port is the operator (docs/gateway.md, "Threat model"). A
request is someone only through a credential:

- ``Authorization: Bearer <token>`` (machines: scripts, Prometheus), verified once by
  :class:`~sagents.gateway._http_security.GatewaySecurityMiddleware` and read here from the
  request's :class:`~sagents.gateway._http_security.Credential`;
- a login (the login URL's ``?token=``, or a login form) that gives a browser a session cookie;
  the console keeps those sessions (:mod:`sagents.gateway.console._auth`).

Tokens: the operator secret (:mod:`sagents.gateway._operator_secret`) and the gateway's own token
(``SAGENTS_GATEWAY_TOKEN``) make their holder the operator, who sees and answers every session; a
profile's token sees only the sessions opened with it. Failed logins are limited per client
address (:class:`LoginLimiter`), so a token cannot be guessed at the speed of the network.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from starlette.requests import Request

from sagents.gateway._http_security import Credential, request_credential
from sagents.gateway._operator_secret import OperatorSecret

__all__ = ["LOGIN_BURST", "LOGIN_REFILL_S", "LoginLimiter", "Principal", "TooManyLogins", "WebAuth"]

LOGIN_BURST = 10  # failed logins a client may make at once
LOGIN_REFILL_S = 6.0  # seconds until one more is allowed (10 a minute after the burst)
_LIMITED_CLIENTS = 4096  # clients remembered by the limiter, least recently seen dropped


@dataclass(frozen=True, kw_only=True)
class Principal:
    """Who a request or a browser session acts as.

    Attributes:
        operator: May see and answer every session's runs and approvals.
        identity: The token's identity (:attr:`Credential.identity`), as the gateway names
            the credential that opened a session.
    """

    operator: bool
    identity: str = ""

    def may_see(self, owner: str) -> bool:
        """Whether this principal may see (and answer for) a session whose credential is
        ``owner``."""
        return self.operator or (bool(self.identity) and owner == self.identity)


class TooManyLogins(Exception):
    """A client failed to log in too often; it may try again after ``retry_after_s``."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"too many failed logins: try again in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


class LoginLimiter:
    """Failed logins per client: a token bucket of :data:`LOGIN_BURST` attempts, one more
    every :data:`LOGIN_REFILL_S` seconds. A client with none left is refused before its token
    is compared, right or wrong (else the limit would still answer guesses).

    Args:
        burst: Failed attempts allowed at once. refill_s: Seconds per attempt regained.
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        *,
        burst: int = LOGIN_BURST,
        refill_s: float = LOGIN_REFILL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = burst
        self._refill_s = refill_s
        self._clock = clock
        self._spent: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client: (n, at)

    def _left(self, client: str) -> float:
        spent, at = self._spent.get(client, (0.0, self._clock()))
        spent = max(0.0, spent - (self._clock() - at) / self._refill_s)
        return self._burst - spent

    def check(self, client: str) -> None:
        """Refuse a client with no attempt left.

        Raises:
            TooManyLogins: none left; the error says when the next one is.
        """
        left = self._left(client)
        if left < 1:
            raise TooManyLogins((1 - left) * self._refill_s)

    def failed(self, client: str) -> None:
        """Spend one attempt of ``client``."""
        spent = self._burst - self._left(client) + 1
        self._spent[client] = (spent, self._clock())
        self._spent.move_to_end(client)
        while len(self._spent) > _LIMITED_CLIENTS:
            self._spent.popitem(last=False)


class WebAuth:
    """The tokens of an HTTP surface and the principals they make.

    Args:
        secret: The operator secret.
        operator_tokens: Other tokens of the operator (``SAGENTS_GATEWAY_TOKEN``).
        session_tokens: Profiles' tokens: their holder sees only the sessions opened with them.
        limiter: Failed logins per client (a new :class:`LoginLimiter` when None).
    """

    def __init__(
        self,
        *,
        secret: OperatorSecret,
        operator_tokens: Sequence[str] = (),
        session_tokens: Sequence[str] = (),
        limiter: LoginLimiter | None = None,
    ) -> None:
        self.secret = secret
        self._operator = [t.encode() for t in (secret.value, *operator_tokens) if t]
        self._others = [t.encode() for t in session_tokens if t]
        self.limiter = limiter or LoginLimiter()

    @property
    def tokens(self) -> tuple[str, ...]:
        """Every accepted bearer token (what the security middleware verifies)."""
        return tuple(t.decode() for t in (*self._operator, *self._others))

    def principal_for(self, token: str) -> Principal | None:
        """The principal of a token, or None when it is not accepted (constant time)."""
        given = token.encode()
        operator = any(hmac.compare_digest(given, t) for t in self._operator)
        other = any(hmac.compare_digest(given, t) for t in self._others)
        if operator or other:
            return Principal(operator=operator, identity=Credential(token).identity)
        return None

    def bearer(self, request: Request) -> Principal | None:
        """The principal of the request's verified ``Authorization: Bearer`` token, if any."""
        token = request_credential(request).token
        return self.principal_for(token) if token is not None else None

    def login(self, request: Request, token: str) -> Principal | None:
        """Check a token given to log in (a login URL or form); None when it is not accepted.

        Raises:
            TooManyLogins: this client failed too often lately (nothing was compared).
        """
        client = request.client.host if request.client is not None else ""
        self.limiter.check(client)
        principal = self.principal_for(token)
        if principal is None:
            self.limiter.failed(client)
        return principal

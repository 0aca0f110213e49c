"""The gateway's HTTP request checks, each parsed exactly once: ``Host``, ``Origin``, credentials.

- ``Host`` (RFC 9110 §7.2; an RFC 3986 authority without userinfo): ``host[:port]``, where host
  is a DNS name, an IPv4 address or a bracketed IPv6 address and port is digits. Anything else
  (``127.0.0.1:8765@evil.com``, a path, a second colon) is malformed. The host must be one of
  the allowed names and the port the bound one (or the one an ``--allowed-host`` names); else
  421, as the MCP spec's DNS-rebinding guidance asks (2025-11-25, "Transports", "Security
  Warning").
- ``Origin`` (RFC 6454 §7): absent, or exactly ``http[s]://host[:port]`` naming a served host
  (any port on a loopback host: a page served from this machine) or matching an
  ``--allowed-host``; ``null`` and anything else get 403. A missing port is the scheme's default
  (80, 443), for ``Host`` too (80: the gateway serves plain HTTP).
- ``Authorization`` (RFC 9110 §11.6.2, RFC 6750 §2.1): at most one header, of the form
  ``Bearer <b64token>`` (scheme case-insensitive, one or more spaces, the token of RFC 6750's
  ``b64token`` characters). Two headers, comma-joined values, another scheme or a scheme
  without token get 401, whether or not tokens are configured. A token must be one of the
  configured ones (constant-time comparison). The result, a :class:`Credential`, is stored in
  the ASGI scope under :data:`CREDENTIAL_SCOPE_KEY`; the gateway reads the caller's identity
  from there and nowhere else (:func:`request_credential`). A verified token is also the
  request's ``user`` (the ``mcp`` SDK's ``AuthenticatedUser``, named by the token's digest,
  never the token), so that the SDK's session manager binds each ``Mcp-Session-Id`` to the
  credential that opened it for every request of the session: POSTed answers to the
  gateway's own requests (an approval's elicitation), the GET stream and DELETE, which never
  reach a gateway handler, get 404 with another token.
- With an ``oauth`` section (docs/gateway.md, "Authorization"), a token that is none of the
  configured ones is checked as an OAuth access token
  (:class:`~sagents.gateway._protected_resource.ProtectedResource`): the credential is then its
  subject (``sub`` of the issuer) and scopes, and the user the SDK binds sessions to is that
  subject, so a refreshed token keeps its sessions. Refusals carry the resource's challenge
  (``resource_metadata``); an unreachable authorization server gets 503, never a pass.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from sagents.gateway._oauth import AuthorizationServerUnavailable, TokenRejected

if TYPE_CHECKING:
    from sagents.gateway._protected_resource import ProtectedResource

__all__ = [
    "CREDENTIAL_SCOPE_KEY",
    "Credential",
    "CredentialError",
    "GatewaySecurityMiddleware",
    "HostRule",
    "parse_authorization",
    "parse_host",
    "parse_host_rule",
    "parse_origin",
    "request_credential",
]

CREDENTIAL_SCOPE_KEY = "sagents.credential"
"""ASGI scope key of the request's :class:`Credential` (set by the middleware only)."""

_HOST = re.compile(
    r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9\-.]*[A-Za-z0-9])?)(?::(\d{1,5}))?"
)
_ORIGIN = re.compile(r"(https?)://(.+)")
_BEARER = re.compile(r"(Bearer) +([A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE)


class CredentialError(ValueError):
    """A malformed or repeated ``Authorization`` header (answered with 401)."""


@dataclass(frozen=True)
class Credential:
    """Who sent a request, as far as the gateway can tell.

    Attributes:
        token: The verified bearer token; None for a request without ``Authorization``.
        subject: For an OAuth access token, its ``sub``; None for a configured token.
        issuer: For an OAuth access token, its ``iss``.
        scopes: For an OAuth access token, its scopes.
    """

    token: str | None = field(default=None, repr=False)
    subject: str | None = None
    issuer: str | None = None
    scopes: frozenset[str] = frozenset()

    @property
    def identity(self) -> str:
        """A stable, non-secret key for the principal ("" without a token): scopes state to
        it. For an OAuth access token it is the subject of its issuer, so every token of one
        user is one principal; for a configured token, the token's digest."""
        if self.token is None:
            return ""
        if self.subject is not None:
            named = f"oauth\0{self.issuer}\0{self.subject}"
            return hashlib.sha256(named.encode()).hexdigest()[:32]
        return hashlib.sha256(self.token.encode()).hexdigest()[:32]


def parse_authorization(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The bearer token of a request's raw headers; None when there is no ``Authorization``.

    Raises:
        CredentialError: more than one ``Authorization`` header, or one that is not exactly
            ``Bearer <token>``.
    """
    values = [value for key, value in headers if key.lower() == b"authorization"]
    if not values:
        return None
    if len(values) > 1:
        raise CredentialError("more than one Authorization header")
    text = values[0].decode("latin-1").strip(" \t")  # optional whitespace around a field value
    match = _BEARER.fullmatch(text)
    if match is None:
        raise CredentialError("the Authorization header is not 'Bearer <token>'")
    return match.group(2)


def parse_host(value: str) -> tuple[str, int | None]:
    """Split a ``Host`` value into a lower-cased host and its port (None when absent).

    Raises:
        ValueError: not exactly ``host[:port]``.
    """
    match = _HOST.fullmatch(value)
    if match is None:
        raise ValueError(f"malformed host {value!r}")
    port = int(match.group(2)) if match.group(2) is not None else None
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"port out of range in {value!r}")
    return match.group(1).lower(), port


def parse_origin(value: str) -> tuple[str, str, int | None]:
    """Split an ``Origin`` value into scheme, lower-cased host and port (None when absent).

    Raises:
        ValueError: not exactly ``http[s]://host[:port]``.
    """
    match = _ORIGIN.fullmatch(value)
    if match is None:
        raise ValueError(f"malformed origin {value!r}")
    host, port = parse_host(match.group(2))
    return match.group(1), host, port


@dataclass(frozen=True)
class HostRule:
    """An accepted ``Host``: a host name and a port (None: any port)."""

    host: str
    port: int | None

    def accepts(self, host: str, port: int | None) -> bool:
        """Whether a parsed ``Host`` matches this rule exactly."""
        return host == self.host and (self.port is None or port == self.port)


def parse_host_rule(value: str) -> HostRule:
    """Read an ``--allowed-host`` value: ``host:port`` or ``host:*`` (any port).

    Raises:
        ValueError: malformed (the message says what is expected).
    """
    if value.endswith(":*"):
        host, _ = parse_host(value[:-2])
        return HostRule(host, None)
    host, port = parse_host(value)
    if port is None:
        raise ValueError(f"--allowed-host {value!r} needs a port: 'host:port' or 'host:*'")
    return HostRule(host, port)


class GatewaySecurityMiddleware:
    """ASGI middleware: ``Host`` (421), ``Origin`` (403), then credentials (401), as above.

    Args:
        app: The MCP app.
        hosts: Host names served (lower case); a ``Host`` must name one with the bound port.
        port: The bound port; None accepts any port for ``hosts`` (port not known yet).
        allowed: Extra accepted ``Host`` values (``--allowed-host``).
        origin_any_port: Accept an ``Origin`` on any port of ``hosts`` (loopback binds).
        tokens: The configured bearer tokens; empty: no token is required. A function
            returning them is asked at each request (a configuration reload changes them).
        token_required: With ``tokens`` (or ``oauth``), a request without ``Authorization``
            gets 401; False lets it through without a credential (an app with a login of its
            own, such as the console: a token given must still be one of ``tokens``).
        oauth: Checks tokens that are none of ``tokens`` as OAuth access tokens; None: no
            OAuth.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: Sequence[str],
        port: int | None,
        allowed: Sequence[HostRule] = (),
        origin_any_port: bool = True,
        tokens: Iterable[str] | Callable[[], Iterable[str]] = (),
        token_required: bool = True,
        oauth: ProtectedResource | None = None,
    ) -> None:
        self.app = app
        self.served = {h.lower() for h in hosts}
        self.allowed = list(allowed)
        self.rules = [HostRule(h, port) for h in sorted(self.served)] + self.allowed
        self.port = port
        self.origin_any_port = origin_any_port
        self._live_tokens = tokens if callable(tokens) else None
        self.tokens = [] if callable(tokens) else [t.encode() for t in tokens if t]
        self.token_required = token_required
        self.oauth = oauth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        if not self._host_ok(headers):
            await _respond(send, 421, b"Invalid Host header", b"text/plain")
            return
        if not self._origin_ok(headers):
            await _respond(send, 403, b"Invalid Origin header", b"text/plain")
            return
        try:
            token = parse_authorization(headers)
        except CredentialError as error:
            await self._unauthorized(send, str(error))
            return
        if self._live_tokens is not None:
            self.tokens = [t.encode() for t in self._live_tokens() if t]
        credential = Credential()
        if token is None:
            if (self.tokens or self.oauth is not None) and self.token_required:
                await self._unauthorized(send, "a valid bearer token is required", error=None)
                return
        elif any(hmac.compare_digest(token.encode(), known) for known in self.tokens):
            credential = Credential(token)
        elif self.oauth is not None:
            found = await self._oauth_credential(send, self.oauth, token)
            if found is None:
                return  # refused
            credential = found
        elif self.tokens:
            await self._unauthorized(send, "a valid bearer token is required")
            return
        # else no token is configured: nothing to verify it against, no identity
        scope[CREDENTIAL_SCOPE_KEY] = credential
        if credential.token is not None:
            principal = f"sagents-token:{credential.identity}"
            scope["user"] = AuthenticatedUser(
                AccessToken(
                    token=principal,
                    client_id=principal,
                    scopes=sorted(credential.scopes),
                    subject=credential.subject,
                    claims={"iss": credential.issuer} if credential.issuer else None,
                )
            )
        else:
            scope.pop("user", None)  # only this middleware says who the caller is
        await self.app(scope, receive, send)

    async def _oauth_credential(
        self, send: Send, oauth: ProtectedResource, token: str
    ) -> Credential | None:
        """The credential of an OAuth access token, or None once the refusal is sent."""
        try:
            info = await oauth.verifier.verify(token)
        except TokenRejected as error:
            await self._unauthorized(send, str(error))
            return None
        except AuthorizationServerUnavailable:
            body = json.dumps(
                {
                    "error": "temporarily_unavailable",
                    "error_description": "the authorization server cannot be reached to "
                    "check the token; try again later",
                }
            ).encode()
            await _respond(send, 503, body, b"application/json", extra=[(b"retry-after", b"5")])
            return None
        missing = [s for s in oauth.required_scopes if s not in info.scopes]
        if missing:
            reason = f"the token lacks the scopes {' '.join(missing)}"
            challenge = oauth.challenge(error="insufficient_scope", description=reason)
            refusal = json.dumps({"error": "insufficient_scope", "error_description": reason})
            await _respond(
                send,
                403,
                refusal.encode(),
                b"application/json",
                extra=[(b"www-authenticate", challenge)],
            )
            return None
        return Credential(token, subject=info.subject, issuer=info.issuer, scopes=info.scopes)

    async def _unauthorized(
        self, send: Send, reason: str, *, error: str | None = "invalid_token"
    ) -> None:
        """401 with the reason; a request without any token gets no ``error`` code (RFC 6750
        §3.1) when OAuth is on, only the challenge."""
        if self.oauth is not None:
            challenge = self.oauth.challenge(error=error, description=reason if error else None)
        else:
            challenge = b'Bearer error="invalid_token"'
        body = json.dumps({"error": error or "invalid_token", "error_description": reason})
        await _respond(
            send, 401, body.encode(), b"application/json", extra=[(b"www-authenticate", challenge)]
        )

    def _host_ok(self, headers: list[tuple[bytes, bytes]]) -> bool:
        values = [v for k, v in headers if k == b"host"]
        if len(values) != 1:
            return False
        try:
            host, port = parse_host(values[0].decode("latin-1"))
        except ValueError:
            return False
        port = 80 if port is None else port  # the gateway serves plain HTTP (RFC 9110 §4.2.1)
        return any(rule.accepts(host, port) for rule in self.rules)

    def _origin_ok(self, headers: list[tuple[bytes, bytes]]) -> bool:
        values = [v for k, v in headers if k == b"origin"]
        if not values:
            return True  # same-origin and non-browser requests carry none
        if len(values) > 1:
            return False
        try:
            scheme, host, port = parse_origin(values[0].decode("latin-1"))
        except ValueError:
            return False
        port = port if port is not None else (443 if scheme == "https" else 80)
        if host in self.served and (self.origin_any_port or self.port in (None, port)):
            return True
        return any(rule.accepts(host, port) for rule in self.allowed)


def request_credential(request: Any) -> Credential:
    """The credential the middleware stored for a request (anonymous when there is none)."""
    scope = getattr(request, "scope", None)
    found = scope.get(CREDENTIAL_SCOPE_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, Credential) else Credential()


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    *,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

"""Serving the gateway over streamable HTTP (the ``mcp`` SDK's transport, on uvicorn/starlette).

Security (issue 7, §1):

- binds 127.0.0.1 by default; binding anything but loopback requires a bearer token, otherwise
  :func:`check_bind` refuses to start with a :class:`~sagents.errors.ConfigError`;
- DNS-rebinding protection is always on (the SDK's ``TransportSecuritySettings``): the ``Host``
  header must name the bound host (loopback names for a loopback bind) or an allowed host,
  otherwise the request gets 421; a foreign ``Origin`` gets 403;
- when any token is configured, every request must carry ``Authorization: Bearer <token>``
  (compared in constant time), otherwise 401; a token bound to a profile selects that profile.
"""

from __future__ import annotations

import hmac
import socket
from collections.abc import Iterable

import anyio
import uvicorn
from anyio.abc import TaskStatus
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from sagents.errors import ConfigError
from sagents.gateway.server import Gateway
from sagents.gateway.settings import GatewaySettings, is_loopback

__all__ = [
    "MCP_PATH",
    "BearerTokenMiddleware",
    "bind_listener",
    "build_http_app",
    "check_bind",
    "serve_http",
]

MCP_PATH = "/mcp"
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_GRACE_S = 1  # seconds open streams get to end when the server stops


def check_bind(settings: GatewaySettings) -> None:
    """Refuse settings that would expose the gateway without authentication.

    Raises:
        ConfigError: the host is not loopback and no bearer token is configured.
    """
    if is_loopback(settings.host):
        return
    if settings.bearer_token or settings.token_profiles:
        return
    raise ConfigError(
        f"refusing to bind {settings.host!r} without a bearer token: anyone who can reach this "
        "address could use every tool",
        key="--host",
        hint="set SAGENTS_GATEWAY_TOKEN (clients then send 'Authorization: Bearer <token>'), or "
        "bind 127.0.0.1",
    )


def _security(settings: GatewaySettings) -> TransportSecuritySettings:
    hosts = list(_LOOPBACK_HOSTS) if is_loopback(settings.host) else [settings.host]
    allowed_hosts = [f"{h}:*" for h in hosts] + list(settings.allowed_hosts)
    allowed_origins = [f"http://{h}:*" for h in hosts] + [f"https://{h}:*" for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )


class BearerTokenMiddleware:
    """ASGI middleware: HTTP requests must carry one of ``tokens`` as a bearer token (else 401)."""

    def __init__(self, app: ASGIApp, tokens: Iterable[str]) -> None:
        self.app = app
        self.tokens = [t.encode() for t in tokens if t]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.tokens:
            await self.app(scope, receive, send)
            return
        given = b""
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    given = token.strip()
        if given and any(hmac.compare_digest(given, token) for token in self.tokens):
            await self.app(scope, receive, send)
            return
        body = b'{"error":"invalid_token","error_description":"a valid bearer token is required"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer error="invalid_token"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def build_http_app(gateway: Gateway, settings: GatewaySettings) -> ASGIApp:
    """The ASGI app serving ``gateway`` at ``/mcp`` with the protections above.

    Raises:
        ConfigError: see :func:`check_bind`.
    """
    check_bind(settings)
    app: Starlette = gateway.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=settings.host,
        transport_security=_security(settings),
    )
    tokens = [settings.bearer_token or "", *settings.token_profiles]
    return BearerTokenMiddleware(app, tokens)


def bind_listener(settings: GatewaySettings) -> socket.socket:
    """The gateway's listening socket: bound, listening, non-blocking, Nagle off.

    Raises:
        ConfigError: the address cannot be bound (``--port``).
    """
    family = socket.AF_INET6 if ":" in settings.host.strip("[]") else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets whose proto says TCP, and accepted sockets inherit the listener's proto. With
    # Nagle on, a response written as headers then body waits for the client's delayed ACK
    # (~40 ms on Linux) on every call. The listener's TCP_NODELAY is inherited too.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((settings.host.strip("[]"), settings.port))
    except OSError as error:
        sock.close()
        raise ConfigError(
            f"cannot bind {settings.host}:{settings.port}: {error.strerror}", key="--port"
        ) from error
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_http(
    gateway: Gateway,
    settings: GatewaySettings,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve over HTTP until cancelled; reports the bound port through ``task_status``.

    The socket is bound before serving starts, so ``await tg.start(serve_http, ...)`` returns a
    port that accepts connections (port 0 picks a free one).

    Raises:
        ConfigError: see :func:`check_bind`; or the address cannot be bound.
    """
    app = build_http_app(gateway, settings)
    sock = bind_listener(settings)
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=_GRACE_S
    )
    server = uvicorn.Server(config)
    stopped = anyio.Event()

    async def run_server() -> None:
        # Shielded so that cancelling serve_http shuts uvicorn down through its own graceful
        # path (should_exit) instead of cancelling it mid-lifespan.
        try:
            with anyio.CancelScope(shield=True):
                await server.serve(sockets=[sock])
        finally:
            stopped.set()
            sock.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_server)
        task_status.started(port)
        try:
            await stopped.wait()
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(_GRACE_S * 3):
                    await stopped.wait()
                server.force_exit = True
                await stopped.wait()

"""Serving the gateway over streamable HTTP (the ``mcp`` SDK's transport, on uvicorn/starlette).

Security (docs/gateway.md, "HTTP security"):

- binds 127.0.0.1 by default; binding anything but loopback requires a bearer token, otherwise
  :func:`check_bind` refuses to start with a :class:`~sagents.errors.ConfigError`;
- DNS-rebinding protection is always on: the ``Host`` header must name the bound host (loopback
  names for a loopback bind) and port, or an allowed host, otherwise the request gets 421; a
  foreign ``Origin`` gets 403 (parsed exactly, :mod:`sagents.gateway._http_security`);
- credentials are parsed once, there: two ``Authorization`` headers or a malformed one get
  401; when any token is configured every request must carry ``Authorization: Bearer <token>``
  (compared in constant time); a token bound to a profile selects that profile;
- the web console needs a login or a bearer token on every route, also on loopback without
  configured tokens: the operator secret of the data dir (:mod:`~sagents.gateway._operator_secret`)
  and the rule of :mod:`~sagents.gateway._web_auth`;
- ``/metrics`` (docs/observability.md) answers the operator's bearer token (the operator secret
  or ``SAGENTS_GATEWAY_TOKEN``), or anyone with ``--metrics-public``;
- with an ``oauth`` section, ``/mcp`` is an OAuth 2.1 protected resource as well (docs/gateway.md,
  "Authorization"; :mod:`sagents.gateway._protected_resource`): its metadata is served without
  a token, its resource URL is ``publicUrl`` + ``/mcp`` (else the bound address), and a
  non-loopback bind without ``publicUrl`` refuses to start.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import uvicorn
from anyio.abc import TaskStatus
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sagents.audit._store import default_data_dir
from sagents.errors import ConfigError
from sagents.gateway._affinity import SessionAffinityCheck
from sagents.gateway._http_security import GatewaySecurityMiddleware, HostRule, parse_host_rule
from sagents.gateway._metrics import METRICS_PATH, MetricsApp
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._protected_resource import ProtectedResource, protected_resource
from sagents.gateway._secrets import OPERATOR_SECRET_NAME
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings, is_loopback
from sagents.gateway._web_auth import WebAuth

if TYPE_CHECKING:
    from sagents.gateway.console._chat import ChatThreads

__all__ = [
    "CONSOLE_PATH",
    "MCP_PATH",
    "bind_listener",
    "build_http_app",
    "check_bind",
    "console_allowed",
    "metrics_app",
    "resource_url",
    "secure_app",
    "serve_asgi",
    "serve_http",
    "serve_metrics",
    "web_auth_of",
]

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
CONSOLE_PATH = "/console"
"""Where the web console is served (docs/console.md)."""
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_GRACE_S = 1  # seconds open streams get to end when the server stops


def check_bind(settings: GatewaySettings) -> None:
    """Refuse settings that would expose the gateway without authentication.

    Raises:
        ConfigError: the host is not loopback and no bearer token or ``oauth`` section is
            configured; or it is not loopback, with OAuth, and no public URL is given.
    """
    if is_loopback(settings.host):
        return
    if settings.oauth is not None and settings.public_url is None:
        raise ConfigError(
            f"with OAuth, binding {settings.host!r} needs the gateway's public URL: it is the "
            "resource tokens are issued for, and a bind address does not say it",
            key="oauth.publicUrl",
            hint="set oauth.publicUrl in the config (or --public-url), e.g. "
            "'https://gw.example.com'",
        )
    if settings.bearer_token or settings.token_profiles or settings.oauth is not None:
        return
    raise ConfigError(
        f"refusing to bind {settings.host!r} without a bearer token: anyone who can reach this "
        "address could use every tool",
        key="--host",
        hint="set SAGENTS_GATEWAY_TOKEN (clients then send 'Authorization: Bearer <token>'), or "
        "bind 127.0.0.1",
    )


def _security_middleware(
    app: ASGIApp,
    settings: GatewaySettings,
    port: int | None,
    *,
    web: WebAuth | None = None,
    oauth: ProtectedResource | None = None,
    public: bool = False,
    gateway: Gateway | None = None,
) -> GatewaySecurityMiddleware:
    """``app`` behind the ``Host``, ``Origin`` and bearer checks: the gateway's tokens (or an
    OAuth access token with ``oauth``) required (``/mcp``), or with ``web`` its tokens
    verified when given and the rest left to the app's login (the console); ``public``: no
    token at all (the resource metadata)."""
    hosts = list(_LOOPBACK_HOSTS) if is_loopback(settings.host) else [settings.host]
    allowed: list[HostRule] = []
    for value in settings.allowed_hosts:
        try:
            allowed.append(parse_host_rule(value))
        except ValueError as error:
            raise ConfigError(
                str(error), key="--allowed-host", hint="give 'host:port' or 'host:*'"
            ) from error
    if settings.public_url is not None:  # what a proxy in front passes on as Host
        public_host = urlsplit(settings.public_url).hostname
        if public_host:
            allowed.append(HostRule(public_host.lower(), None))
    tokens: Iterable[str] | Callable[[], Iterable[str]]
    if web is not None:
        tokens = web.tokens
    elif gateway is not None:  # read at each request: a configuration reload changes them
        live = gateway

        def current() -> list[str]:
            return [settings.bearer_token or "", *live.token_profiles]

        tokens = current
    else:
        tokens = [settings.bearer_token or "", *settings.token_profiles]
    return GatewaySecurityMiddleware(
        app,
        hosts=hosts,
        port=port if port else None,
        allowed=allowed,
        origin_any_port=is_loopback(settings.host),
        tokens=() if public else tokens,
        token_required=web is None and not public,
        oauth=oauth,
    )


def console_allowed(settings: GatewaySettings) -> bool:
    """Whether the web console may be served with these settings: on loopback, or over TLS
    (``--tls-cert``/``--tls-key``, or ``--behind-tls-proxy``) beyond it, since its login
    sends the bearer token in a form."""
    if not settings.console:
        return False
    return is_loopback(settings.host) or settings.tls_cert is not None or settings.tls_proxy


class _PathRouter:
    """Sends ``/metrics``, the resource metadata paths, and ``/console`` with everything below
    it, to their apps; the rest to ``/mcp``'s app."""

    def __init__(
        self,
        mcp: ASGIApp,
        metrics: ASGIApp,
        console: ASGIApp | None,
        metadata: tuple[tuple[str, ...], ASGIApp] | None = None,
    ) -> None:
        self.mcp = mcp
        self.metrics = metrics
        self.console = console
        self.metadata = metadata

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == METRICS_PATH:
            await self.metrics(scope, receive, send)
        elif self.metadata is not None and path in self.metadata[0]:
            await self.metadata[1](scope, receive, send)
        elif self.console is not None and (
            path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")
        ):
            await self.console(scope, receive, send)
        else:
            await self.mcp(scope, receive, send)


def build_http_app(
    gateway: Gateway,
    settings: GatewaySettings,
    *,
    port: int | None = None,
    chat: ChatThreads | None = None,
) -> ASGIApp:
    """The ASGI app serving ``gateway`` at ``/mcp`` with the protections above.

    Args:
        gateway: The gateway to serve.
        settings: Bind address, tokens, allowed hosts.
        port: The bound port a ``Host`` header must name; None uses ``settings.port`` (0: any
            port, for an app built before its socket is bound).
        chat: The AG-UI threads of the console's Chat page (the config's ``agent`` section);
            None: no Chat page.

    The web console is served at ``/console/`` beside it (docs/console.md) when
    :func:`console_allowed`: behind the same ``Host`` and ``Origin`` checks, with its own login
    (a browser cannot send the bearer header).

    Raises:
        ConfigError: see :func:`check_bind`; or a malformed ``--allowed-host``.
        RuntimeError: the gateway was closed (its ``async with`` block has ended).
    """
    gateway._check_not_closed("build_http_app()")  # the package's own check
    check_bind(settings)
    app: Starlette = gateway.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=settings.host,
        # an idle session is ended, and what it holds released (docs/configuration.md)
        session_idle_timeout=gateway.session_idle_timeout_s,
        # Host/Origin are checked, exactly, by GatewaySecurityMiddleware (the SDK's check
        # matches "host:*" as a prefix and accepts "127.0.0.1:1@evil.com").
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    served: ASGIApp = app
    if gateway.replica_id is not None:  # replicas: 2025 sessions need affinity
        served = SessionAffinityCheck(app, replica_id=gateway.replica_id)
    bound = settings.port if port is None else port
    resource = (
        protected_resource(settings.oauth, resource_url(settings, bound))
        if settings.oauth is not None
        else None
    )
    mcp = _security_middleware(served, settings, bound, oauth=resource, gateway=gateway)
    metadata = None
    if resource is not None:
        metadata_app = _security_middleware(resource.metadata_app(), settings, bound, public=True)
        metadata = (resource.metadata_paths, metadata_app)
    if settings.console and not console_allowed(settings):
        logger.warning(
            "the web console is not served on %s without TLS: give --tls-cert and --tls-key, "
            "or --behind-tls-proxy when a TLS-terminating proxy is in front",
            settings.host,
        )
    secret = _operator_secret(gateway)
    metrics = metrics_app(gateway, settings, bound, secret)
    if not console_allowed(settings):
        return _PathRouter(mcp, metrics, None, metadata)
    from sagents.gateway.console import console_for_gateway  # jinja2 only when served

    console = _security_middleware(
        console_for_gateway(gateway, settings, secret=secret, oauth=resource, chat=chat),
        settings,
        bound,
        web=web_auth_of(settings, secret),
    )
    return _PathRouter(mcp, metrics, console, metadata)


def resource_url(settings: GatewaySettings, port: int) -> str:
    """The URL of ``/mcp`` as clients reach it: the public URL's, else the bound address's
    (the resource identifier of RFC 8707 and RFC 9728, and the default token audience)."""
    if settings.public_url is not None:
        return settings.public_url + MCP_PATH
    scheme = "https" if settings.tls_cert else "http"
    host = settings.host.strip("[]")
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}{MCP_PATH}"


def metrics_app(
    gateway: Gateway, settings: GatewaySettings, port: int | None, secret: OperatorSecret
) -> ASGIApp:
    """``/metrics`` (docs/observability.md) behind the ``Host`` and ``Origin`` checks: for the
    operator's bearer token, or for anyone with ``settings.metrics_public``."""
    web = web_auth_of(settings, secret)
    app = MetricsApp(gateway.metrics, web, public=settings.metrics_public)
    return _security_middleware(app, settings, port, web=web)


async def serve_metrics(
    gateway: Gateway,
    settings: GatewaySettings,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve only ``/metrics`` on ``settings.metrics_port`` (``--metrics-port``) until
    cancelled; reports the bound port through ``task_status``.

    Raises:
        ConfigError: the address cannot be bound.
    """
    secret = _operator_secret(gateway)
    listen = replace(settings, port=settings.metrics_port or 0)

    def build(port: int) -> ASGIApp:
        return Starlette(routes=[Route(METRICS_PATH, metrics_app(gateway, listen, port, secret))])

    await serve_asgi(build, listen, task_status=task_status)


def _operator_secret(gateway: Gateway) -> OperatorSecret:
    """The data directory's operator secret (made when there is none), redacted by the
    gateway's redactor from now on (docs/gateway.md, "Secrets")."""
    secret = OperatorSecret.load_or_create(default_data_dir())
    if gateway.redactor is not None:
        gateway.redactor.add([(OPERATOR_SECRET_NAME, secret.value)])
    return secret


def web_auth_of(settings: GatewaySettings, secret: OperatorSecret) -> WebAuth:
    """Who the gateway's web surfaces accept: the operator secret and ``SAGENTS_GATEWAY_TOKEN``
    as the operator, profiles' tokens for their own sessions."""
    return WebAuth(
        secret=secret,
        operator_tokens=(settings.bearer_token,) if settings.bearer_token else (),
        session_tokens=tuple(settings.token_profiles),
    )


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
    chat: ChatThreads | None = None,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve over HTTP until cancelled; reports the bound port through ``task_status``.
    ``chat``: the console's Chat page (see :func:`build_http_app`).

    The socket is bound before serving starts, so ``await tg.start(serve_http, ...)`` returns a
    port that accepts connections (port 0 picks a free one).

    Raises:
        ConfigError: see :func:`check_bind`; or the address cannot be bound.
    """
    check_bind(settings)
    await serve_asgi(
        lambda port: build_http_app(gateway, settings, port=port, chat=chat),
        settings,
        task_status=task_status,
    )


def secure_app(
    app: ASGIApp, settings: GatewaySettings, port: int | None, *, web: WebAuth
) -> ASGIApp:
    """``app`` behind the gateway's ``Host`` and ``Origin`` checks, a bearer token verified
    against ``web``'s when one is given (for an app with a login of its own:
    ``sagents console``)."""
    return _security_middleware(app, settings, port, web=web)


async def serve_asgi(
    build: Callable[[int], ASGIApp],
    settings: GatewaySettings,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the app ``build(port)`` returns on ``settings``' address (TLS when
    ``settings.tls_cert``) until cancelled; reports the bound port through ``task_status``.

    Raises:
        ConfigError: the address cannot be bound, or ``build`` refuses the settings.
    """
    sock = bind_listener(settings)
    port = int(sock.getsockname()[1])
    try:
        app = build(port)
    except ConfigError:
        sock.close()
        raise
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=_GRACE_S,
        ssl_certfile=str(settings.tls_cert) if settings.tls_cert else None,
        ssl_keyfile=str(settings.tls_key) if settings.tls_key else None,
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

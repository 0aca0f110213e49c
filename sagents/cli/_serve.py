"""``sagents serve``: run the MCP gateway over stdio (default) or streamable HTTP.

See docs/gateway.md.
"""

from __future__ import annotations

import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from sagents.audit._store import default_data_dir
from sagents.cli._console_chat import agent_model, open_console_chat
from sagents.cli._logs import setup_logging
from sagents.cli._vision import image_model_from_config
from sagents.cli._workspace import prepare_workspace
from sagents.config._loader import load_config
from sagents.config._oauth import check_url
from sagents.core._permissions import PermissionMode, parse_permission_mode
from sagents.errors import ConfigError, StoreError
from sagents.gateway._factory import build_gateway
from sagents.gateway._http_server import (
    CONSOLE_PATH,
    MCP_PATH,
    check_bind,
    console_allowed,
    resource_url,
    serve_http,
    serve_metrics,
)
from sagents.gateway._metrics import METRICS_PATH
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._reload import ConfigReloader, watch_config
from sagents.gateway._settings import (
    APPROVAL_ROUTES,
    DEFAULT_HOST,
    DEFAULT_PORT,
    TOKEN_ENV,
    ApprovalRoute,
    GatewaySettings,
    TransportName,
    load_profiles,
    scope_profiles,
    token_profiles,
)
from sagents.gateway._tool_search import ToolRanker
from sagents.store._location import parse_store_url

if TYPE_CHECKING:
    from sagents.agent import OpenAIChatModel

__all__ = ["resolve_settings", "serve"]


def resolve_settings(
    *,
    config: Path | None,
    profile: str | None,
    transport: str,
    host: str,
    port: int,
    mode: str | None,
    workspace: Path | None,
    background_after: float | None,
    allowed_hosts: list[str],
    shared_workspace: bool = False,
    store: str | None = None,
    approvals: str = "elicitation",
    console: bool = True,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    tls_proxy: bool = False,
    tool_search: bool = False,
    metrics_public: bool = False,
    metrics_port: int | None = None,
    public_url: str | None = None,
) -> GatewaySettings:
    """Turn the command line (and the environment's bearer token) into settings.

    Raises:
        ConfigError: an unknown transport, mode or profile; a bad config file; a non-loopback
            HTTP bind without a bearer token; ``--tool-search`` over HTTP without one; a
            malformed ``--store`` address; a bad ``oauth`` section or ``--public-url``; with
            OAuth, a non-loopback bind without a public URL.
    """
    if store:
        parse_store_url(store)  # refused here, before anything starts
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown transport {transport!r}; use stdio or http", key="--transport")
    chosen_transport: TransportName = "http" if transport == "http" else "stdio"
    try:
        chosen_mode: PermissionMode = parse_permission_mode(mode) if mode else "ask"
    except ValueError as error:
        raise ConfigError(str(error), key="--mode") from error
    profiles = load_profiles(config) if config is not None else {}
    oauth = load_config(config).oauth if config is not None else None
    if public_url is not None:
        public_url = check_url(public_url, key="--public-url").rstrip("/")
    elif oauth is not None:
        public_url = oauth.public_url
    chosen = None
    if profile is not None:
        if profile not in profiles:
            known = ", ".join(sorted(profiles)) or "none defined"
            raise ConfigError(
                f"unknown profile {profile!r} (profiles: {known})",
                file=str(config) if config else None,
                key="--profile",
            )
        chosen = profiles[profile]
        if chosen.mode is not None and mode is None:
            chosen_mode = chosen.mode
    if background_after is not None and background_after < 0:
        raise ConfigError("must be 0 or more seconds", key="--background-after")
    route = _approval_route(approvals, chosen_transport, console)
    if (tls_cert is None) != (tls_key is None):
        raise ConfigError(
            "--tls-cert and --tls-key go together", key="--tls-key" if tls_cert else "--tls-cert"
        )
    settings = GatewaySettings(
        config=config,
        profile=chosen,
        transport=chosen_transport,
        host=host,
        port=port,
        mode=chosen_mode,
        workspace=workspace,
        shared_workspace=shared_workspace,
        bearer_token=os.environ.get(TOKEN_ENV) or None,
        token_profiles=token_profiles(profiles) if chosen_transport == "http" else {},
        background_after_s=background_after,
        allowed_hosts=tuple(allowed_hosts),
        store=store or None,
        approvals=route,
        console=console and chosen_transport == "http",
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_proxy=tls_proxy,
        tool_search=tool_search,
        metrics_public=metrics_public,
        metrics_port=metrics_port,
        oauth=oauth if chosen_transport == "http" else None,
        public_url=public_url,
        scope_profiles=scope_profiles(profiles) if chosen_transport == "http" else (),
    )
    if chosen_transport == "http":
        check_bind(settings)
        if tool_search and not (
            settings.bearer_token or settings.token_profiles or settings.oauth is not None
        ):
            raise ConfigError(
                "--tool-search keeps each client's expanded tools, and over HTTP a 2026-07-28 "
                "client is told apart only by its bearer token: without a token every such "
                "client would share (and change) one tool list",
                key="--tool-search",
                hint=f"set {TOKEN_ENV} (clients then send 'Authorization: Bearer <token>'), "
                "or serve over stdio",
            )
    return settings


def _approval_route(value: str, transport: TransportName, console: bool) -> ApprovalRoute:
    """Read ``--approvals``: the console answers only where it is served.

    Raises:
        ConfigError: an unknown value, or ``console``/``both`` without the console.
    """
    if value not in APPROVAL_ROUTES:
        raise ConfigError(
            f"unknown approvals route {value!r}; use {', '.join(APPROVAL_ROUTES)}",
            key="--approvals",
        )
    route: ApprovalRoute = value
    if route != "elicitation" and (transport != "http" or not console):
        raise ConfigError(
            f"--approvals {route} needs the web console, which only --transport http serves",
            key="--approvals",
            hint="add --transport http (and leave out --no-console), or use --approvals "
            "elicitation",
        )
    return route


async def _reload_on_hangup(reloader: ConfigReloader | None) -> None:
    """Reload the config file on each SIGHUP (docs/configuration.md, "Reloading")."""
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            if reloader is None:
                print("sagents serve: SIGHUP, but no --config to reload", file=sys.stderr)
            else:
                await reloader.reload()


async def _stop_on_signal(scope: anyio.CancelScope, received: list[int]) -> None:
    """Cancel ``scope`` on the first SIGTERM or SIGINT (noted in ``received``); a second one
    ends the process at once (the handlers are gone by then)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            received.append(signum)
            print(
                f"sagents serve: {signal.Signals(signum).name}, closing the upstream servers",
                file=sys.stderr,
            )
            scope.cancel()
            return


def _image_model(settings: GatewaySettings) -> OpenAIChatModel | None:
    """The vision model of ``image_understanding`` when the config enables it (a config
    error is left for the gateway to report)."""
    if settings.config is None:
        return None
    try:
        return image_model_from_config(load_config(settings.config))
    except ConfigError:
        return None


def _tool_ranker(settings: GatewaySettings) -> ToolRanker | None:
    if not settings.tool_search:
        return None
    from sagents.agent._suggest import suggest_tools  # the ranking loads only when asked for

    return suggest_tools


async def _run(settings: GatewaySettings, watch: bool = False) -> bool:
    """Serve until stdin's EOF (stdio), or a signal; True when a signal ended it. SIGHUP (and
    with ``watch`` a change of the file) reloads the config file."""
    received: list[int] = []
    chat_model = agent_model(settings)  # a model that cannot be used stops the start
    image_model = _image_model(settings)
    # Upstreams start in the background: initialize is answered at once, and each server's
    # tools are announced (notifications/tools/list_changed) as it becomes ready.
    # SIGTERM and SIGINT end the serving like stdin's EOF: the gateway then closes in order
    # (each upstream gets its stdin closed, then its process group is ended, every step
    # bounded), instead of the process dying with its upstreams left running.
    try:
        async with (
            build_gateway(
                settings,
                wait_for_servers=False,
                tool_ranker=_tool_ranker(settings),
                image_model=image_model,
            ) as gateway,
            open_console_chat(gateway, settings, model=chat_model) as chat,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(_stop_on_signal, tg.cancel_scope, received)
            reloader = ConfigReloader(gateway, settings) if settings.config is not None else None
            tg.start_soon(_reload_on_hangup, reloader)
            if watch and reloader is not None and settings.config is not None:
                await tg.start(watch_config, reloader, settings.config)
            if settings.metrics_port is not None:
                metrics_port = await tg.start(serve_metrics, gateway, settings)
                print(
                    f"sagents serve: metrics at http://{settings.host}:{metrics_port}"
                    f"{METRICS_PATH}",
                    file=sys.stderr,
                )
            if settings.transport == "stdio":
                if sys.stdin.isatty():  # a person started it by hand: say what it waits for
                    print(
                        "sagents serve: waiting for an MCP client on stdin (stdio transport; "
                        "an MCP client starts this command itself). Ctrl-C or Ctrl-D to stop.",
                        file=sys.stderr,
                    )
                await gateway.run_stdio()
            else:
                port = await tg.start(partial(serve_http, chat=chat), gateway, settings)
                scheme = "https" if settings.tls_cert else "http"
                print(
                    f"sagents serve: {scheme}://{settings.host}:{port}{MCP_PATH}", file=sys.stderr
                )
                if settings.oauth is not None:
                    print(
                        f"sagents serve: OAuth resource {resource_url(settings, port)} "
                        f"(authorization server {settings.oauth.issuer})",
                        file=sys.stderr,
                    )
                if console_allowed(settings):
                    # The operator's login (docs/console.md): the secret the app was built with.
                    secret = OperatorSecret.load_or_create(default_data_dir())
                    url = secret.login_url(f"{scheme}://{settings.host}:{port}{CONSOLE_PATH}/")
                    print(f"sagents serve: console at {url}", file=sys.stderr)
                    if chat is not None:
                        page = f"{scheme}://{settings.host}:{port}{CONSOLE_PATH}/chat"
                        print(f"sagents serve: chat at {page} (log in first)", file=sys.stderr)
                await anyio.sleep_forever()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for model in (image_model, chat_model):
                if model is not None:
                    await model.aclose()
    return bool(received)


def serve(
    config: Annotated[
        Path | None, typer.Option("--config", help="mcpServers JSON file with sagents settings.")
    ] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Named profile from the config.")
    ] = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio or http.")] = "stdio",
    host: Annotated[
        str, typer.Option("--host", help="HTTP bind address (non-loopback needs a token).")
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", help="HTTP port (0: a free one).")] = DEFAULT_PORT,
    mode: Annotated[
        str | None, typer.Option("--mode", help="ask, auto or read-only (default ask).")
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace", help="Root of the sessions' workspaces (one directory per session)."
        ),
    ] = None,
    shared_workspace: Annotated[
        bool,
        typer.Option(
            "--shared-workspace",
            help="Every session uses --workspace itself (trusted users only: sessions see "
            "each other's files and records).",
        ),
    ] = False,
    background_after: Annotated[
        float | None,
        typer.Option("--background-after", help="Seconds before a call becomes a background call."),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="<host:port>",
            help="Extra Host header value accepted (host:port).",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="postgresql://user:password@host:5432/db: state shared by replicas "
            "(docs/scale-out.md); default: SQLite files in the data dir.",
        ),
    ] = None,
    approvals: Annotated[
        str,
        typer.Option(
            "--approvals",
            help="Who approves writes: elicitation (the MCP client), console (the web "
            "console) or both (first answer wins).",
        ),
    ] = "elicitation",
    no_console: Annotated[
        bool, typer.Option("--no-console", help="Do not serve the web console at /console/.")
    ] = False,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="TLS certificate (PEM): serve HTTPS.")
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", help="Private key (PEM) of --tls-cert.")
    ] = None,
    behind_tls_proxy: Annotated[
        bool,
        typer.Option(
            "--behind-tls-proxy",
            help="A TLS-terminating proxy is in front: serve the console beyond loopback over "
            "plain HTTP to it, with Secure cookies.",
        ),
    ] = False,
    tool_search: Annotated[
        bool,
        typer.Option(
            "--tool-search",
            help="List search_tools and tool_expand_tools, then only the tools each session "
            "expanded (for clients with many tools; over HTTP it needs a bearer token).",
        ),
    ] = False,
    metrics_public: Annotated[
        bool,
        typer.Option(
            "--metrics-public",
            help="Serve /metrics without a bearer token (default: the operator secret or "
            f"{TOKEN_ENV} as 'Authorization: Bearer').",
        ),
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            metavar="<port>",
            min=0,
            max=65535,
            help="Also serve /metrics on this port of --host (with stdio too; 0: a free one).",
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Reload --config when the file changes (SIGHUP reloads it too): servers "
            "added start, removed ones stop after their calls, profiles apply at once.",
        ),
    ] = False,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="The URL clients reach the gateway at (https://gw.example.com), e.g. behind a "
            "reverse proxy: the OAuth resource and default audience are it + /mcp.",
        ),
    ] = None,
) -> None:
    """Run the MCP gateway (stdio by default; --transport http for streamable HTTP)."""
    setup_logging()
    try:
        if workspace is not None:
            workspace = prepare_workspace(workspace, command="sagents serve")
        settings = resolve_settings(
            config=config,
            profile=profile,
            transport=transport,
            host=host,
            port=port,
            mode=mode,
            workspace=workspace,
            background_after=background_after,
            allowed_hosts=list(allowed_host or []),
            shared_workspace=shared_workspace,
            store=store,
            approvals=approvals,
            console=not no_console,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_proxy=behind_tls_proxy,
            tool_search=tool_search,
            metrics_public=metrics_public,
            metrics_port=metrics_port,
            public_url=public_url,
        )
        if watch and config is None:
            raise ConfigError("--watch reloads the config file: give --config", key="--watch")
        signalled = anyio.run(_run, settings, watch)
    except (ConfigError, StoreError) as error:
        print(f"sagents serve: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if signalled and settings.transport == "stdio":
        # Everything is closed; a worker thread may still be reading a stdin the transport
        # cannot poll (a file), and the interpreter would wait for it before exiting.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

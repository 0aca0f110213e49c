"""``sagents console --data-dir DIR``: browse the audit and the records of past runs, without a
gateway (docs/console.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import anyio
import typer

from sagents.cli._logs import setup_logging
from sagents.errors import ConfigError
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._settings import TOKEN_ENV, GatewaySettings, is_loopback

__all__ = ["console", "console_settings"]

DEFAULT_CONSOLE_PORT = 8766


def console_settings(
    *,
    host: str,
    port: int,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_proxy: bool,
) -> GatewaySettings:
    """The listening settings of ``sagents console`` (the token from ``SAGENTS_GATEWAY_TOKEN``).

    Raises:
        ConfigError: a non-loopback bind without a token, or without TLS (``--tls-cert`` and
            ``--tls-key``, or ``--behind-tls-proxy``); one of the TLS files without the other.
    """
    if (tls_cert is None) != (tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together", key="--tls-cert")
    token = os.environ.get(TOKEN_ENV) or None
    if not is_loopback(host):
        if token is None:
            raise ConfigError(
                f"refusing to serve the console on {host!r} without a token",
                key="--host",
                hint=f"set {TOKEN_ENV} (the console asks for it once), or bind 127.0.0.1",
            )
        if tls_cert is None and not tls_proxy:
            raise ConfigError(
                f"refusing to serve the console on {host!r} over plain HTTP: the login sends "
                "the token",
                key="--host",
                hint="give --tls-cert and --tls-key, or --behind-tls-proxy when a "
                "TLS-terminating proxy is in front",
            )
    return GatewaySettings(
        transport="http",
        host=host,
        port=port,
        bearer_token=token,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_proxy=tls_proxy,
    )


async def _serve(settings: GatewaySettings, data_dir: Path, workspace: Path | None,
                 shared: bool) -> None:  # fmt: skip
    from sagents.gateway._http_server import CONSOLE_PATH, secure_app, serve_asgi, web_auth_of
    from sagents.gateway.console import data_dir_console

    secret = OperatorSecret.load_or_create(data_dir)
    app = data_dir_console(
        data_dir,
        workspace=workspace,
        shared_workspace=shared,
        token=settings.bearer_token,
        secure_cookies=settings.tls_cert is not None or settings.tls_proxy,
        secret=secret,
    )
    web = web_auth_of(settings, secret)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_asgi, lambda p: secure_app(app, settings, p, web=web), settings)
        scheme = "https" if settings.tls_cert else "http"
        url = secret.login_url(f"{scheme}://{settings.host}:{port}{CONSOLE_PATH}/")
        print(f"sagents console: log in at {url}", file=sys.stderr)


def console(
    data_dir: Annotated[
        Path,
        typer.Option(
            "--data-dir",
            help="The gateway's data directory (audit.sqlite3, workspaces/; default "
            "$SAGENTS_DATA_DIR).",
        ),
    ],
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace", help="The sessions' workspaces root, if not <data-dir>/workspaces."
        ),
    ] = None,
    shared_workspace: Annotated[
        bool, typer.Option("--shared-workspace", help="--workspace was one shared workspace.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="Bind address.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="Port (0: a free one).")
    ] = DEFAULT_CONSOLE_PORT,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="TLS certificate (PEM).")
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", help="Its private key (PEM).")
    ] = None,
    behind_tls_proxy: Annotated[
        bool, typer.Option("--behind-tls-proxy", help="A TLS-terminating proxy is in front.")
    ] = False,
) -> None:
    """Browse the audit and the records of past runs in a web console."""
    setup_logging()
    try:
        if not data_dir.is_dir():
            raise ConfigError(f"no such directory {str(data_dir)!r}", key="--data-dir")
        settings = console_settings(
            host=host, port=port, tls_cert=tls_cert, tls_key=tls_key, tls_proxy=behind_tls_proxy
        )
        anyio.run(_serve, settings, data_dir, workspace, shared_workspace)
    except ConfigError as error:
        print(f"sagents console: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None

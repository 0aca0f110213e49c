"""``sagents auth login|logout|status|rotate-key``: the gateway's logins to upstream servers
that need OAuth (``"auth": "oauth"``; docs/oauth.md, docs/cli-tools.md).

Every command uses the store ``sagents serve`` uses (``--store``, else the configuration's
``store.url``, else the SQLite files of the data directory) and the key of
``SAGENTS_SECRET_KEY`` (else the data directory's ``secret.key``). ``login`` runs the MCP SDK's
OAuth flow: it prints the authorization URL, waits (``--timeout``) for the browser's redirect
to a loopback address of its own, and keeps the tokens sealed in the store for the principal
(the local operator by default; ``--principal SUB`` for the subject ``SUB`` of the gateway's
``oauth`` issuer). A running gateway uses a new login at its principal's next call.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import anyio
import httpx2
import typer
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from sagents.audit._store import default_data_dir
from sagents.cli._tools import ConfigOption, _load
from sagents.cli.main import WholeHelpGroup
from sagents.config import SagentsConfig
from sagents.errors import ConfigError, StoreError
from sagents.gateway._http_security import Credential
from sagents.gateway._http_server import serve_asgi
from sagents.gateway._settings import GatewaySettings
from sagents.mcp import StreamableHttpServerParameters
from sagents.mcp._oauth import LoginVault, load_secret_key, login, rotate_secret_key
from sagents.store import GatewayStore, open_store, parse_store_url

__all__ = ["LOGIN_ERRORS", "app", "principal_of"]

LOGIN_ERRORS = (OAuthFlowError, OSError, httpx2.HTTPError, MCPError)
"""What a failed login raises: the SDK flow's errors, the network's, the server's."""

T = TypeVar("T")

app = typer.Typer(
    help="Log the gateway in to upstream servers that need OAuth, per principal.",
    no_args_is_help=True,
    add_completion=False,
    cls=WholeHelpGroup,
)

_StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="<url>",
        help="The store sagents serve uses (default: the configuration's store.url, else "
        "the data directory's SQLite files).",
    ),
]
_PrincipalOption = Annotated[
    str | None,
    typer.Option(
        "--principal",
        metavar="<sub>",
        help="The subject (sub) of the gateway's oauth issuer whose login this is. Default: "
        "the local operator (the principal of clients without a token).",
    ),
]


def principal_of(config: SagentsConfig, subject: str | None) -> str:
    """The principal ``--principal SUB`` names: the identity the gateway gives the subject
    ``SUB`` of its ``oauth`` issuer ("" without ``--principal``: the local operator).

    Raises:
        ConfigError: ``--principal`` without an ``oauth`` section.
    """
    if subject is None:
        return ""
    if config.oauth is None:
        raise ConfigError(
            "--principal names a subject of the gateway's oauth issuer, and the configuration "
            "has no 'oauth' section",
            key="--principal",
        )
    return Credential(token="", subject=subject, issuer=config.oauth.issuer).identity


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _with_vault(
    config: SagentsConfig, store_url: str | None, work: Callable[[GatewayStore], Awaitable[T]]
) -> T:
    file = str(config.source) if config.source else None
    url, key = (store_url, "--store") if store_url else (config.store_url, "store.url")
    location = parse_store_url(url, key=key, file=file, lease_s=config.store_lease_s)

    async def main() -> T:
        async with open_store(location, data_dir=default_data_dir()) as store:
            return await work(store)

    try:
        return anyio.run(main)
    except (ConfigError, StoreError) as error:
        raise _fail(error.message) from None


def _vault(store: GatewayStore) -> LoginVault:
    return LoginVault(store.logins, load_secret_key(default_data_dir(), shared=store.shared))


def _oauth_server(config: SagentsConfig, server: str) -> StreamableHttpServerParameters:
    for entry in config.servers:
        if entry.name == server:
            params = entry.params
            if isinstance(params, StreamableHttpServerParameters) and params.oauth is not None:
                return params
            raise _fail(f'server {server!r} is not "auth": "oauth"')
    raise _fail(f"no enabled server {server!r} in the configuration")


@app.command("login")
def login_command(
    server: Annotated[str, typer.Argument(metavar="SERVER", help="The upstream server.")],
    principal: _PrincipalOption = None,
    config: ConfigOption = None,
    store: _StoreOption = None,
    port: Annotated[
        int,
        typer.Option(
            "--port",
            metavar="<port>",
            help="The loopback port the browser is sent back to (0: a free one).",
        ),
    ] = 0,
    timeout: Annotated[
        float,
        typer.Option("--timeout", metavar="<seconds>", help="How long to wait for the browser."),
    ] = 300.0,
) -> None:
    """Log in to SERVER: print the authorization URL, wait for the browser's redirect."""
    loaded = _load(config)
    params = _oauth_server(loaded, server)
    try:
        who = principal_of(loaded, principal)
    except ConfigError as error:
        raise _fail(error.message) from None

    async def work(opened: GatewayStore) -> list[str]:
        return await _login(_vault(opened), server, params, who, port=port, timeout=timeout)

    try:
        tools = _with_vault(loaded, store, work)
    except TimeoutError:
        raise _fail(f"no redirect from the browser within {timeout:g} s") from None
    except LOGIN_ERRORS as error:
        raise _fail(f"the login to {server!r} failed: {error}") from None
    typer.echo(f"logged in to {server}: {len(tools)} tools")


async def _login(
    vault: LoginVault,
    server: str,
    params: StreamableHttpServerParameters,
    principal: str,
    *,
    port: int,
    timeout: float,  # noqa: ASYNC109 - the person's time, bounded here
) -> list[str]:
    landed: anyio.Event = anyio.Event()
    result: list[AuthorizationCodeResult] = []

    async def callback(request: Request) -> PlainTextResponse:
        query = request.query_params
        if "error" in query:
            result.append(AuthorizationCodeResult(code="", state=query.get("state")))
            landed.set()
            return PlainTextResponse(f"The login failed: {query['error']}", status_code=400)
        result.append(
            AuthorizationCodeResult(
                code=query.get("code", ""), state=query.get("state"), iss=query.get("iss")
            )
        )
        landed.set()
        return PlainTextResponse("Logged in. You may close this window.")

    web = Starlette(routes=[Route("/callback", callback)])
    settings = GatewaySettings(transport="http", host="127.0.0.1", port=port)

    async def show(url: str) -> None:
        typer.echo("Open this URL in a browser to log in:", err=True)
        typer.echo(url)

    async def wait() -> AuthorizationCodeResult:
        with anyio.fail_after(timeout):
            await landed.wait()
        return result[0]

    tools: list[list[str]] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as tg:
        bound: int = await tg.start(serve_asgi, lambda _port: web, settings)
        try:
            tools.append(
                await login(
                    vault,
                    server,
                    params,
                    principal,
                    redirect_uri=f"http://127.0.0.1:{bound}/callback",
                    show_url=show,
                    wait_for_redirect=wait,
                )
            )
        except (*LOGIN_ERRORS, TimeoutError) as error:
            failed.append(error)  # raised as itself, not in the task group's ExceptionGroup
        finally:
            tg.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return tools[0]


@app.command("logout")
def logout_command(
    server: Annotated[str, typer.Argument(metavar="SERVER", help="The upstream server.")],
    principal: _PrincipalOption = None,
    config: ConfigOption = None,
    store: _StoreOption = None,
) -> None:
    """Forget the login of a principal to SERVER (its tokens are dropped from the store)."""
    loaded = _load(config)
    _oauth_server(loaded, server)
    try:
        who = principal_of(loaded, principal)
    except ConfigError as error:
        raise _fail(error.message) from None

    async def work(opened: GatewayStore) -> bool:
        return await opened.logins.delete(server, who)

    if _with_vault(loaded, store, work):
        typer.echo(f"logged out of {server}")
    else:
        typer.echo(f"no login to {server} was kept for that principal")


@app.command("status")
def status_command(
    config: ConfigOption = None,
    store: _StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """List the logins kept for each "auth": "oauth" server, and which need a login."""
    loaded = _load(config)
    servers = [
        entry.name
        for entry in loaded.servers
        if isinstance(entry.params, StreamableHttpServerParameters) and entry.params.oauth
    ]

    async def work(opened: GatewayStore) -> list[dict[str, Any]]:
        vault = _vault(opened)
        rows: list[dict[str, Any]] = []
        kept = {(row.server, row.principal) for row in await opened.logins.logins()}
        for server in servers:
            principals = sorted({p for s, p in kept if s == server} | {""})
            for principal in principals:
                record = await vault.load(server, principal)
                usable = record is not None and record.tokens is not None
                rows.append(
                    {
                        "server": server,
                        "principal": principal or "operator",
                        "state": "logged_in" if usable else "needs_login",
                        "expires_at": record.expires_at if record and usable else None,
                        "refreshable": bool(usable and record and record.tokens
                                            and record.tokens.refresh_token),
                    }
                )  # fmt: skip
        return rows

    rows = _with_vault(loaded, store, work)
    if as_json:
        typer.echo(json.dumps(rows))
        return
    if not rows:
        typer.echo('no "auth": "oauth" server in the configuration')
    for row in rows:
        typer.echo(f"{row['server']}  {row['principal']}  {row['state']}")


@app.command("rotate-key")
def rotate_key_command(config: ConfigOption = None, store: _StoreOption = None) -> None:
    """Re-seal every kept login with a new key (SAGENTS_SECRET_KEY's first, else a new file
    key)."""
    loaded = _load(config)

    async def work(opened: GatewayStore) -> int:
        return await rotate_secret_key(opened.logins, default_data_dir(), shared=opened.shared)

    from cryptography.fernet import InvalidToken

    try:
        count = _with_vault(loaded, store, work)
    except InvalidToken:
        raise _fail(
            "a kept login cannot be opened with any of the keys given: nothing was changed "
            "(give the old key after the new one: SAGENTS_SECRET_KEY=new,old)"
        ) from None
    typer.echo(f"re-sealed {count} logins with the new key")

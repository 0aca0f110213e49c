"""Upstream servers that need an OAuth login (``"auth": "oauth"``; docs/oauth.md), against
real components: the authorization server is the npm package ``oidc-provider``
(tests/gateway/oauth_peer.py), the upstream the MCP SDK's server with its auth settings
(tests/gateway/oauth_upstream.py), and the gateway's side the MCP SDK's client OAuth support.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from cryptography.fernet import Fernet, MultiFernet
from mcp.shared.auth import AuthorizationCodeResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sagents.cli._tools import tools_listing
from sagents.config import parse_config
from sagents.config._oauth import OAuthConfig
from sagents.config.tools import build_tool_manager
from sagents.errors import ConfigError
from sagents.gateway import serve_http
from sagents.gateway._factory import open_gateway
from sagents.gateway._http_server import serve_asgi
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._upstream_logins import UpstreamLogins
from sagents.gateway._workspaces import Workspaces
from sagents.gateway.console._app import UPSTREAM_CALLBACK_PATH, ConsoleData, build_console_app
from sagents.mcp import StreamableHttpServerParameters
from sagents.mcp._oauth import (
    REFRESH_MARGIN_S,
    SECRET_KEY_ENV,
    LoginVault,
    PrincipalConnections,
    login,
)
from sagents.store._logins import SqliteLogins
from sagents.tool import SessionContext
from sagents.tool._context import PRINCIPAL_KEY
from tests.cli.cli_helpers import SAGENTS
from tests.gateway.console.test_console_http import csrf_of
from tests.gateway.oauth_peer import authorization_server, browse, signing_key
from tests.gateway.oauth_upstream import Upstream, digest, protected_server
from tests.gateway.test_oauth import sdk_client_logging_in

pytestmark = pytest.mark.anyio

CALLBACK = "http://127.0.0.1:1/callback"  # never reached: the test's browser stops before it
ALICE = "a" * 32  # principals as the gateway names them (a token's identity)
BOB = "b" * 32


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    jwk, _ = signing_key("as-key")
    with authorization_server(jwk) as url:
        yield url


def vault_at(path: Path, key: bytes | None = None) -> LoginVault:
    return LoginVault(SqliteLogins(path / "logins.sqlite3"), MultiFernet([Fernet(key or KEY)]))


KEY = Fernet.generate_key()


def params_of(upstream: Upstream) -> StreamableHttpServerParameters:
    config = parse_config({"mcpServers": {"gh": {"url": upstream.url, "auth": "oauth"}}})
    params = config.servers[0].params
    assert isinstance(params, StreamableHttpServerParameters)
    return params


async def log_in(vault: LoginVault, upstream: Upstream, principal: str, subject: str) -> list[str]:
    """Log ``principal`` in as ``subject`` (the person's browser is :func:`browse`)."""
    landed: list[str] = []

    async def show(url: str) -> None:
        landed.append(await browse(url, subject, CALLBACK))

    async def redirected() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(landed[-1]).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
        )

    return await login(
        vault,
        "gh",
        params_of(upstream),
        principal,
        redirect_uri=CALLBACK,
        show_url=show,
        wait_for_redirect=redirected,
    )


def as_principal(principal: str) -> SessionContext:
    return SessionContext(trusted={PRINCIPAL_KEY: principal})


def config_for(upstream: Upstream) -> Any:
    return parse_config({"mcpServers": {"gh": {"url": upstream.url, "auth": "oauth"}}})


async def test_each_principal_calls_with_its_own_login_and_one_without_is_told_to_log_in(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            assert await log_in(vault, upstream, "", "operator") == ["whoami"]
            assert await log_in(vault, upstream, ALICE, "alice") == ["whoami"]
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                alice = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                bob = await manager.run_tool("gh__whoami", {}, as_principal(BOB))
                operator = await manager.run_tool("gh__whoami", {}, as_principal(""))
                await log_in(vault, upstream, BOB, "bob")
                bob_after = await manager.run_tool("gh__whoami", {}, as_principal(BOB))
    assert not alice.is_error
    assert alice.text == "alice"
    assert operator.text == "operator"
    assert bob.is_error
    assert bob.error is not None
    assert bob.error.code == "needs_login"
    assert "sagents auth login gh --principal" in bob.error.message
    assert bob.error.details["server"] == "gh"
    assert bob_after.text == "bob"  # a login given while the gateway runs serves at once
    subjects = [subject for subject, _ in upstream.calls]
    assert subjects.count("alice") == 1
    assert "bob" in subjects
    tokens = {subject: token for subject, token in upstream.calls}
    assert len(set(tokens.values())) == len(tokens)  # each principal its own token


async def test_a_token_due_to_expire_is_refreshed_before_use_and_a_revoked_login_needs_a_new_one(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, "", "operator")
            await log_in(vault, upstream, ALICE, "alice")
            given = await vault.load("gh", ALICE)
            assert given is not None
            assert given.tokens is not None
            assert given.tokens.refresh_token  # offline_access was asked for and granted
            # the time passes: the token (valid for an hour at the issuer) has 30 s left by
            # the record, less than the refresh margin
            given.expires_at = time.time() + REFRESH_MARGIN_S / 2
            await vault.save("gh", ALICE, given)
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                first = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                refreshed = await vault.load("gh", ALICE)
                # the authorization server revokes alice's grant (her refresh token)
                assert refreshed is not None
                assert refreshed.tokens is not None
                assert refreshed.client is not None
                assert refreshed.metadata is not None
                async with httpx2.AsyncClient() as http:
                    revoked = await http.post(
                        str(refreshed.metadata.revocation_endpoint),
                        data={
                            "token": refreshed.tokens.refresh_token,
                            "token_type_hint": "refresh_token",
                            "client_id": refreshed.client.client_id,
                        },
                    )
                assert revoked.status_code == 200, revoked.text
                # the access token (a JWT the upstream checks offline) lives on until it is
                # due; then the refresh is refused (a new connection: the gateway restarted)
                refreshed.expires_at = time.time() + REFRESH_MARGIN_S / 2
                await vault.save("gh", ALICE, refreshed)
                async with await build_tool_manager(
                    config_for(upstream), logins=vault
                ) as restarted:
                    after = await restarted.run_tool("gh__whoami", {}, as_principal(ALICE))
            dropped = await vault.load("gh", ALICE)
    assert first.text == "alice"
    assert refreshed.tokens.access_token != given.tokens.access_token  # refreshed and kept
    assert upstream.calls[0] == ("alice", digest(refreshed.tokens.access_token))
    assert after.is_error
    assert after.error is not None
    assert after.error.code == "needs_login"
    assert dropped is not None
    assert dropped.tokens is None
    assert dropped.client is not None  # the registered client stays for the next login


async def test_logins_are_sealed_and_a_wrong_key_is_no_login_that_the_right_key_restores(
    issuer: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    vault = vault_at(tmp_path)
    wrong = vault_at(tmp_path, Fernet.generate_key())
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, "", "operator")
            await log_in(vault, upstream, ALICE, "alice")
            record = await vault.load("gh", ALICE)
            async with await build_tool_manager(config_for(upstream), logins=wrong) as manager:
                refused = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                status = manager.mcp_server_status("gh")
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                restored = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
    assert record is not None
    assert record.tokens is not None
    stored = (tmp_path / "logins.sqlite3").read_bytes()
    assert record.tokens.access_token.encode() not in stored
    assert record.tokens.refresh_token is not None
    assert record.tokens.refresh_token.encode() not in stored
    assert b"alice" not in stored
    # the operator's login (which lists the tools) cannot be opened either: the server shows
    # needs_login, with how to log in, and offers no tools until the right key is back
    assert status.needs_login
    assert status.state == "failed"
    assert status.last_error == ("MCP server 'gh' needs a login: log in with sagents auth login gh")
    assert refused.is_error
    assert refused.error is not None
    assert refused.error.code == "unknown_tool"
    assert "cannot be opened with the key" in caplog.text
    assert restored.text == "alice"  # nothing was lost to the wrong key


def sagents_cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SAGENTS), *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def cli_login(args: list[str], subject: str, env: dict[str, str]) -> str:
    """``sagents auth login ...`` as a person runs it: open the URL it prints, log in as
    ``subject``, land on its loopback address; returns what it printed."""
    process = sagents_cli("auth", "login", *args, env=env)
    assert process.stdout is not None
    url = await anyio.to_thread.run_sync(process.stdout.readline)
    assert url.startswith("http"), process.communicate()
    redirect_uri = parse_qs(urlsplit(url).query)["redirect_uri"][0]
    assert redirect_uri.startswith("http://127.0.0.1:")  # its own loopback address
    landed = await browse(url.strip(), subject, redirect_uri)
    async with httpx2.AsyncClient() as http:
        answer = await http.get(landed)
    assert answer.text == "Logged in. You may close this window."
    out, err = await anyio.to_thread.run_sync(process.communicate)
    assert process.returncode == 0, err
    return out


def gateway_settings(tmp_path: Path, upstream: Upstream, issuer: str) -> GatewaySettings:
    """An HTTP gateway's settings: ``gh`` the upstream, its clients logging in at ``issuer``."""
    config = tmp_path / "sagents.json"
    server = {"url": upstream.url, "auth": "oauth", "permission": "read_only"}
    oauth = {"issuer": issuer, "requiredScopes": ["mcp"]}
    config.write_text(json.dumps({"mcpServers": {"gh": server}, "oauth": oauth}))
    oauth_config = OAuthConfig(issuer=issuer, required_scopes=("mcp",))
    return GatewaySettings(config=config, transport="http", port=0, oauth=oauth_config)


async def test_through_the_gateway_each_oauth_user_reaches_the_upstream_with_their_own_login(
    issuer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"SAGENTS_DATA_DIR": str(tmp_path / "data"), SECRET_KEY_ENV: KEY.decode()}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with anyio.fail_after(120):
        async with protected_server(issuer) as upstream:
            settings = gateway_settings(tmp_path, upstream, issuer)
            config = settings.config
            logged = await cli_login(["gh", "--config", str(config)], "operator", env)
            async with open_gateway(settings) as gateway, anyio.create_task_group() as tg:
                url = f"http://127.0.0.1:{await tg.start(serve_http, gateway, settings)}/mcp"
                async with sdk_client_logging_in(url, "alice", [], "auto") as alice:
                    before = await alice.call_tool("gh__whoami", {})
                    await cli_login(
                        ["gh", "--principal", "alice", "--config", str(config)], "alice", env
                    )
                    after = await alice.call_tool("gh__whoami", {})
                async with sdk_client_logging_in(url, "bob", [], "auto") as bob:
                    other = await bob.call_tool("gh__whoami", {})
                tg.cancel_scope.cancel()
            status = sagents_cli("auth", "status", "--json", "--config", str(config), env=env)
            listed, _ = await anyio.to_thread.run_sync(status.communicate)
            logout = sagents_cli(
                "auth", "logout", "gh", "--principal", "alice", "--config", str(config), env=env
            )
            left, _ = await anyio.to_thread.run_sync(logout.communicate)
            vault = LoginVault(
                SqliteLogins(tmp_path / "data" / "logins.sqlite3"), MultiFernet([Fernet(KEY)])
            )
            kept = [(row.server, row.principal) for row in await vault.store.logins()]
    assert logged.strip().endswith("logged in to gh: 1 tools")
    assert before.is_error
    assert "needs a login: log in with sagents auth login gh --principal" in str(before.content)
    assert not after.is_error
    assert after.structured_content == {"result": "alice"}
    assert other.is_error  # bob's session never uses alice's login
    assert "needs a login" in str(other.content)
    assert [subject for subject, _ in upstream.calls] == ["alice"]
    rows = json.loads(listed)
    assert [(row["principal"] == "operator", row["state"]) for row in rows] == [
        (True, "logged_in"),
        (False, "logged_in"),
    ]
    assert left.strip() == "logged out of gh"
    assert kept == [("gh", "")]  # alice's login is gone, the operator's stays


def console_of(
    vault: LoginVault, upstream: Upstream, data_dir: Path
) -> tuple[UpstreamLogins, httpx2.ASGITransport]:
    """The console of a gateway at ``http://127.0.0.1:9`` whose logins are ``vault``'s."""
    logins = UpstreamLogins(vault, {"gh": params_of(upstream)})
    data = ConsoleData(
        workspaces=Workspaces(data_dir / "workspaces"),
        audit_path=data_dir / "audit.sqlite3",
        todo_path=data_dir / "todo.sqlite3",
        upstream_logins=logins,
        public_base="http://127.0.0.1:9",
    )
    return logins, httpx2.ASGITransport(app=build_console_app(data))


async def test_the_consoles_authorize_logs_its_principal_in_and_only_its_browser_may_finish(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    data_dir = tmp_path / "console"
    callback = "http://127.0.0.1:9" + UPSTREAM_CALLBACK_PATH  # never reached: browse stops
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            logins, transport = console_of(vault, upstream, data_dir)
            async with (
                logins.running(),
                httpx2.AsyncClient(transport=transport, base_url="http://testserver") as http,
                httpx2.AsyncClient(transport=transport, base_url="http://testserver") as other,
            ):
                secret = OperatorSecret.load_or_create(data_dir).value
                await http.get(f"/console/?token={secret}")
                before = await http.get("/console/servers")
                form = {"server": "gh", "csrf": csrf_of(before.text)}
                forged = await http.post("/console/servers/authorize", data={"server": "gh"})
                started = await http.post("/console/servers/authorize", data=form)
                landed = await browse(started.headers["location"], "operator", callback)
                path = landed.removeprefix("http://127.0.0.1:9")
                stolen = await other.get(path)  # another browser with the same answer
                finished = await http.get(path)
                again = await http.get(path)  # single use
                after = await http.get(finished.headers["location"])
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                called = await manager.run_tool("gh__whoami", {}, as_principal(""))
    assert "needs_login" in before.text
    assert forged.status_code == 403  # no CSRF token: no login started
    assert started.status_code == 303
    assert stolen.status_code == 400
    assert finished.status_code == 303
    assert again.status_code == 400
    assert "Logged in to gh." in after.text
    assert "logged in" in after.text
    assert called.text == "operator"


async def test_before_any_login_the_server_shows_needs_login_at_once(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    with anyio.fail_after(60):  # never waits for a person
        async with (
            protected_server(issuer) as upstream,
            await build_tool_manager(config_for(upstream), logins=vault) as manager,
        ):
            listing = tools_listing(manager)
            routed = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
    (server,) = listing["servers"]
    assert server["state"] == "needs_login"
    assert (
        server["last_error"] == "MCP server 'gh' needs a login: log in with sagents auth login gh"
    )
    assert server["tools"] == []
    assert routed.error is not None
    assert routed.error.code == "unknown_tool"  # no tools until the operator's login lists them
    assert await vault.store.logins() == []  # nothing kept from the refused attempts


async def test_a_gateway_on_a_shared_store_refuses_to_start_without_the_secret_key(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    config = tmp_path / "sagents.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"gh": {"url": "http://127.0.0.1:9/mcp", "auth": "oauth"}},
                "store": {"url": postgres_url},
            }
        )
    )
    with anyio.fail_after(60), pytest.raises(ConfigError, match=SECRET_KEY_ENV) as caught:
        async with open_gateway(GatewaySettings(config=config)):
            pass
    assert "every replica must seal upstream logins with the same key" in caught.value.message
    assert not (tmp_path / "data" / "secret.key").exists()  # no key of its own instead


async def test_a_gateway_refuses_to_start_on_a_secret_key_others_can_read_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(data))
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    config = tmp_path / "sagents.json"
    server = {"url": "http://127.0.0.1:9/mcp", "auth": "oauth"}
    config.write_text(json.dumps({"mcpServers": {"gh": server}}))
    async with open_gateway(GatewaySettings(config=config)):
        pass  # the key is made, private
    key = data / "secret.key"
    assert key.stat().st_mode & 0o777 == 0o600
    key.chmod(0o644)
    with (
        anyio.fail_after(60),
        pytest.raises(ConfigError, match="readable by other users") as caught,
    ):
        async with open_gateway(GatewaySettings(config=config)):
            pass
    assert caught.value.details["file"] == str(key)
    assert caught.value.hint == f"chmod 600 {key}"


async def test_over_http_with_a_public_url_needs_login_names_the_consoles_servers_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    config = tmp_path / "sagents.json"
    config.write_text(
        json.dumps({"mcpServers": {"gh": {"url": "http://127.0.0.1:9/mcp", "auth": "oauth"}}})
    )
    settings = GatewaySettings(config=config, transport="http", public_url="https://gw.example.com")
    with anyio.fail_after(60):
        async with open_gateway(settings, wait_for_servers=False) as gateway:
            assert gateway.upstream_logins is not None
            hint = gateway.upstream_logins.vault.login_hint("gh", ALICE)
    assert hint == (
        "the console's Servers page (https://gw.example.com/console/servers) or "
        "sagents auth login gh --principal <your subject>"
    )


async def test_a_token_the_upstream_refuses_mid_session_ends_in_needs_login_not_a_hang(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, "", "operator")
            await log_in(vault, upstream, ALICE, "alice")
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                first = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                upstream.revoked.add(upstream.calls[-1][1])  # the server revokes her token
                refused = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                again = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                operator = await manager.run_tool("gh__whoami", {}, as_principal(""))
            dropped = await vault.load("gh", ALICE)
    assert first.text == "alice"
    assert refused.error is not None
    assert refused.error.code == "needs_login"
    assert again.error is not None
    assert again.error.code == "needs_login"
    assert operator.text == "operator"  # the others' connections are untouched
    assert dropped is not None
    assert dropped.tokens is None


async def test_a_login_given_again_survives_the_refusal_of_the_old_connections_token(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, "", "operator")
            await log_in(vault, upstream, ALICE, "alice")
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                first = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                old_token = upstream.calls[-1][1]
                # alice logs in again (the console's Authorize, or sagents auth login from
                # another shell, or another replica) while her connection is open...
                await log_in(vault, upstream, ALICE, "alice")
                given = await vault.load("gh", ALICE)
                # ...and then the upstream refuses the token her old connection still holds
                upstream.revoked.add(old_token)
                await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                kept = await vault.load("gh", ALICE)
                again = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
    assert first.text == "alice"
    assert given is not None
    assert given.tokens is not None
    assert kept is not None
    assert kept.tokens == given.tokens  # the old connection's refusal is not the new login's
    assert again.text == "alice"
    assert upstream.calls[-1][1] == digest(given.tokens.access_token)


async def test_a_connections_refresh_never_overwrites_a_newer_login_nor_undoes_a_logout(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, ALICE, "alice")
            first = await vault.load("gh", ALICE)

            async def no_login(_url: str) -> None:
                raise AssertionError("a connection never asks for a login")

            async def no_code() -> AuthorizationCodeResult:
                raise AssertionError("a connection never waits for a code")

            def connection_storage() -> Any:
                provider = vault.provider(
                    "gh",
                    params_of(upstream),
                    ALICE,
                    redirect_uri=CALLBACK,
                    record=None,
                    redirect_handler=no_login,
                    callback_handler=no_code,
                    interactive=False,
                )
                return provider.context.storage

            # a connection read alice's login; she logs in again; then it refreshes
            stale = connection_storage()
            read = await stale.get_tokens()
            await log_in(vault, upstream, ALICE, "alice")
            second = await vault.load("gh", ALICE)
            assert first is not None
            assert first.tokens is not None
            assert second is not None
            refreshed = first.tokens.model_copy(update={"access_token": "refreshed-by-stale"})
            await stale.set_tokens(refreshed)
            after_refresh = await vault.load("gh", ALICE)
            # a connection read her login; she logs out; then it refreshes
            stale = connection_storage()
            await stale.get_tokens()
            await vault.forget("gh", ALICE)
            await stale.set_tokens(refreshed)
            after_logout = await vault.load("gh", ALICE)
            # the login is still hers and unchanged since: the refresh is kept
            await log_in(vault, upstream, ALICE, "alice")
            current = connection_storage()
            await current.get_tokens()
            await current.set_tokens(refreshed)
            kept = await vault.load("gh", ALICE)
    assert read == first.tokens
    assert after_refresh is not None
    assert after_refresh.tokens == second.tokens
    assert after_logout is None
    assert kept is not None
    assert kept.tokens == refreshed


async def test_a_running_gateway_follows_a_logout_or_new_login_given_elsewhere_at_the_next_call(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, "", "operator")
            await log_in(vault, upstream, ALICE, "alice")
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                first = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                # sagents auth logout from another shell (the store, not this gateway)
                assert await vault.forget("gh", ALICE)
                logged_out = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                await log_in(vault, upstream, ALICE, "alice")
                back = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                # she logs in again as another account of hers at the upstream
                await log_in(vault, upstream, ALICE, "alice-work")
                switched = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
    assert first.text == "alice"
    assert logged_out.error is not None
    assert logged_out.error.code == "needs_login"
    assert back.text == "alice"
    assert switched.text == "alice-work"


async def test_with_the_store_out_of_reach_an_open_connection_serves_and_others_get_a_clear_error(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    store = tmp_path / "logins.sqlite3"
    aside = tmp_path / "logins.aside"
    with anyio.fail_after(90):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, "", "operator")
            await log_in(vault, upstream, ALICE, "alice")
            await log_in(vault, upstream, BOB, "bob")
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                first = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                os.replace(store, aside)
                store.mkdir()  # the store cannot be opened now
                served = await manager.run_tool("gh__whoami", {}, as_principal(ALICE))
                unread = await manager.run_tool("gh__whoami", {}, as_principal(BOB))
                store.rmdir()
                os.replace(aside, store)
                back = await manager.run_tool("gh__whoami", {}, as_principal(BOB))
    assert first.text == "alice"
    assert served.text == "alice"
    assert unread.error is not None
    assert unread.error.code == "store_unavailable", unread.error
    assert back.text == "bob"


async def test_past_max_open_the_least_recently_used_idle_connection_is_closed_and_reopens(
    issuer: str, tmp_path: Path
) -> None:
    vault = vault_at(tmp_path)
    carol = "c" * 32
    with anyio.fail_after(120):
        async with protected_server(issuer) as upstream:
            for principal, subject in ((ALICE, "alice"), (BOB, "bob"), (carol, "carol")):
                await log_in(vault, upstream, principal, subject)
            params = params_of(upstream)
            settings = parse_config({"mcpServers": {"gh": {"url": upstream.url}}}).servers[0]
            connections = PrincipalConnections("gh", params, settings.settings, vault, max_open=2)
            try:
                alice = await connections.call(ALICE, "whoami", {})
                bob = await connections.call(BOB, "whoami", {})
                after_two = connections.connected()
                carol_call = await connections.call(carol, "whoami", {})
                after_three = connections.connected()  # alice's, the least recent, closed
                alice_again = await connections.call(ALICE, "whoami", {})
                after_four = connections.connected()
            finally:
                await connections.aclose()
            closed = connections.connected()
    assert [alice.text, bob.text, carol_call.text, alice_again.text] == [
        "alice",
        "bob",
        "carol",
        "alice",
    ]
    assert after_two == [ALICE, BOB]
    assert after_three == [BOB, carol]
    assert after_four == [carol, ALICE]
    assert closed == []


async def test_a_token_endpoint_that_never_answers_fails_the_login_in_bounded_time(
    tmp_path: Path,
) -> None:
    """A hostile (or stuck) authorization server: discovery and registration answer, the code
    exchange never does. The login fails within the server's timeout; it never hangs (the
    console's flow would hold its task, the CLI its person, for ever)."""
    stuck = anyio.Event()  # never set: the token endpoint's answer

    def hostile(port: int) -> Any:
        base = f"http://127.0.0.1:{port}"
        metadata = {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "jwks_uri": f"{base}/jwks",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        }

        async def discovery(_request: Request) -> JSONResponse:
            return JSONResponse(metadata)

        async def jwks(_request: Request) -> JSONResponse:
            public = {k: v for k, v in signing_key("hostile")[0].items() if k != "d"}
            return JSONResponse({"keys": [public]})

        async def register(request: Request) -> JSONResponse:
            client = await request.json()
            return JSONResponse({**client, "client_id": "hostile-client"}, status_code=201)

        async def token(_request: Request) -> JSONResponse:
            await stuck.wait()
            return JSONResponse({})

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", discovery),
                Route("/.well-known/oauth-authorization-server", discovery),
                Route("/jwks", jwks),
                Route("/register", register, methods=["POST"]),
                Route("/token", token, methods=["POST"]),
            ]
        )

    settings = GatewaySettings(transport="http", host="127.0.0.1", port=0)
    async with anyio.create_task_group() as tg:
        port: int = await tg.start(serve_asgi, hostile, settings)
        async with protected_server(f"http://127.0.0.1:{port}") as upstream:
            params = replace(params_of(upstream), timeout=2.0)
            shown: list[str] = []

            async def show(url: str) -> None:
                shown.append(url)

            async def redirected() -> AuthorizationCodeResult:
                state = parse_qs(urlsplit(shown[-1]).query)["state"][0]
                return AuthorizationCodeResult(code="a-code", state=state)

            with anyio.fail_after(60), pytest.raises(httpx2.TimeoutException):
                await login(
                    vault_at(tmp_path),
                    "gh",
                    params,
                    ALICE,
                    redirect_uri=CALLBACK,
                    show_url=show,
                    wait_for_redirect=redirected,
                )
        tg.cancel_scope.cancel()
    assert shown  # the flow reached the authorization URL, then the exchange


async def secrets_in(vault: LoginVault) -> set[str]:
    """Every token and client secret the logins in ``vault`` hold now."""
    found: set[str] = set()
    for row in await vault.store.logins():
        record = await vault.load(row.server, row.principal)
        assert record is not None
        if record.tokens is not None:
            found.update(t for t in (record.tokens.access_token, record.tokens.refresh_token) if t)
        if record.client is not None and record.client.client_secret:
            found.add(record.client.client_secret)
    return found


async def test_no_token_nor_client_secret_reaches_a_log_a_result_the_cli_or_the_console(
    issuer: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    vault = vault_at(tmp_path)
    secrets: set[str] = set()

    shown: dict[str, str] = {}  # where: what it showed
    with anyio.fail_after(120):
        async with protected_server(issuer) as upstream:
            await log_in(vault, upstream, "", "operator")
            await log_in(vault, upstream, ALICE, "alice")
            secrets |= await secrets_in(vault)
            given = await vault.load("gh", ALICE)
            assert given is not None
            given.expires_at = time.time() + REFRESH_MARGIN_S / 2  # due: the next call refreshes
            await vault.save("gh", ALICE, given)
            async with await build_tool_manager(config_for(upstream), logins=vault) as manager:
                results = [await manager.run_tool("gh__whoami", {}, as_principal(ALICE))]
                secrets |= await secrets_in(vault)  # the refreshed tokens
                upstream.revoked.add(upstream.calls[-1][1])  # the server refuses her token
                for principal in (ALICE, ALICE, BOB, ""):
                    results.append(
                        await manager.run_tool("gh__whoami", {}, as_principal(principal))
                    )
                shown["server status"] = repr(manager.mcp_server_status("gh"))
            shown["call results"] = "\n".join(repr(result) for result in results)
            config = tmp_path / "sagents.json"
            config.write_text(
                json.dumps({"mcpServers": {"gh": {"url": upstream.url, "auth": "oauth"}}})
            )
            env = {"SAGENTS_DATA_DIR": str(tmp_path), SECRET_KEY_ENV: KEY.decode()}
            status = sagents_cli("auth", "status", "--json", "--config", str(config), env=env)
            listed, errors = await anyio.to_thread.run_sync(status.communicate)
            shown["sagents auth status --json"] = listed + errors
            console = tmp_path / "console"
            logins, transport = console_of(vault, upstream, console)
            async with (
                logins.running(),
                httpx2.AsyncClient(transport=transport, base_url="http://testserver") as http,
            ):
                await http.get(f"/console/?token={OperatorSecret.load_or_create(console).value}")
                page = await http.get("/console/servers")
                shown["console servers page"] = page.text
    assert results[0].text == "alice"  # refreshed, then refused: every path was taken
    assert results[1].error is not None
    assert results[1].error.code == "needs_login"
    assert results[-1].text == "operator"
    assert status.returncode == 0, errors
    assert "logged_in" in listed
    assert page.status_code == 200
    assert "gh" in page.text
    assert len(secrets) >= 4  # two logins' access and refresh tokens, and the refreshed ones
    shown["logs"] = caplog.text
    for secret in secrets:
        leaks = [where for where, text in shown.items() if secret in text]
        assert not leaks, f"a token or client secret leaked into: {leaks}"


WHOAMI_SCRIPT = {
    "code": "from agent_tools import call\nprint(call('gh__whoami', {}))",
    "tools": ["gh__whoami"],
    "description": "who am I upstream",
}


async def test_no_token_nor_client_secret_reaches_the_gateways_files_or_its_clients(
    issuer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    data = tmp_path / "data"
    env = {"SAGENTS_DATA_DIR": str(data), SECRET_KEY_ENV: KEY.decode()}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    vault = vault_at(data)
    secrets: set[str] = set()
    with anyio.fail_after(120):
        async with protected_server(issuer) as upstream:
            settings = gateway_settings(tmp_path, upstream, issuer)
            config = settings.config
            printed = await cli_login(["gh", "--config", str(config)], "operator", env)
            printed += await cli_login(
                ["gh", "--principal", "alice", "--config", str(config)], "alice", env
            )
            secrets |= await secrets_in(vault)
            (alice,) = [row.principal for row in await vault.store.logins() if row.principal]
            given = await vault.load("gh", alice)
            assert given is not None
            given.expires_at = time.time() + REFRESH_MARGIN_S / 2  # due: the next call refreshes
            await vault.save("gh", alice, given)
            async with open_gateway(settings) as gateway, anyio.create_task_group() as tg:
                url = f"http://127.0.0.1:{await tg.start(serve_http, gateway, settings)}/mcp"
                async with sdk_client_logging_in(url, "alice", [], "auto") as client:
                    refreshed = await client.call_tool("gh__whoami", {})
                    secrets |= await secrets_in(vault)
                    scripted = await client.call_tool("run_script", WHOAMI_SCRIPT)
                    upstream.revoked.add(upstream.calls[-1][1])  # the server refuses her token
                    refused = await client.call_tool("gh__whoami", {})
                    refused_in_script = await client.call_tool("run_script", WHOAMI_SCRIPT)
                tg.cancel_scope.cancel()
    assert refreshed.structured_content == {"result": "alice"}
    assert refused.is_error
    assert "needs a login" in str(refused.content)
    assert "alice" in str(scripted.content)
    assert "needs a login" in str(refused_in_script.content)
    assert len(secrets) >= 6  # two logins' access and refresh tokens, and alice's refreshed ones
    files = {path: path.read_bytes() for path in data.rglob("*") if path.is_file()}
    audited = [content for path, content in files.items() if path.name.startswith("audit")]
    assert any(b"gh__whoami" in content for content in audited)  # the calls were recorded
    results = (refreshed, scripted, refused, refused_in_script)
    shown = {
        "logs": caplog.text.encode(),
        "results": repr(results).encode(),
        "sagents auth login": printed.encode(),
    }
    shown.update((str(path), content) for path, content in files.items())
    for secret in secrets:
        leaks = [where for where, text in shown.items() if secret.encode() in text]
        assert not leaks, f"a token or client secret leaked into: {leaks}"

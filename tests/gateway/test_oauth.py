"""``sagents serve`` as an OAuth 2.1 resource server, against a real authorization server.

The authorization server is the npm package ``oidc-provider`` on loopback
(tests/gateway/oauth_peer.py); tokens come from it through authorization code + PKCE, or, for
the kinds of bad token it would never issue (expired, not yet valid, ``alg: none``), are
signed with its own key. The client is the ``mcp`` SDK's, with its OAuth support.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from sagents.config._oauth import OAuthConfig
from sagents.gateway import Gateway, Profile, serve_http
from sagents.gateway._settings import GatewaySettings
from tests.gateway.fakes import FakeProvider
from tests.gateway.oauth_peer import authorization_server, browse, issue_token, signing_key
from tests.gateway.test_http import client
from tests.gateway.test_http_security import _initialize
from tests.mcp.helpers import free_port

pytestmark = pytest.mark.anyio

KID = "as-key"
CALLBACK = "http://127.0.0.1:1/callback"  # never reached: the test's browser stops before it
_JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
_INITIALIZE = _initialize({})


@dataclass(frozen=True)
class Issuer:
    url: str
    key: ec.EllipticCurvePrivateKey


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    jwk, key = signing_key(KID)
    with authorization_server(jwk) as url:
        yield Issuer(url, key)


@dataclass(frozen=True)
class Served:
    url: str
    gateway: Gateway
    provider: FakeProvider


@asynccontextmanager
async def oauth_gateway(
    oauth: OAuthConfig, profiles: tuple[Profile, ...] = (), **settings: Any
) -> AsyncIterator[Served]:
    provider = FakeProvider()
    chosen = GatewaySettings(
        transport="http", port=0, oauth=oauth, scope_profiles=profiles, **settings
    )
    async with (
        Gateway(provider, scope_profiles=profiles) as gateway,
        anyio.create_task_group() as tg,
    ):
        port = await tg.start(serve_http, gateway, chosen)
        yield Served(f"http://127.0.0.1:{port}/mcp", gateway, provider)
        tg.cancel_scope.cancel()


class MemoryTokens:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_client_logging_in(url: str, subject: str, landed: list[str], mode: str) -> Client:
    """The SDK client with its OAuth support: discovery, dynamic registration, authorization
    code + PKCE; the user's browser step is :func:`browse` logging ``subject`` in."""

    async def redirect(authorization_url: str) -> None:
        landed.append(await browse(authorization_url, subject, CALLBACK))

    async def callback() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(landed[-1]).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
        )

    auth = OAuthClientProvider(
        url,
        OAuthClientMetadata(
            redirect_uris=[AnyUrl(CALLBACK)],
            client_name="sagents tests",
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryTokens(),
        redirect_handler=redirect,
        callback_handler=callback,
    )
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(auth=auth))
    return Client(transport, mode=mode)


def sign(issuer: Issuer, claims: dict[str, Any], **header: Any) -> str:
    return jwt.encode(claims, issuer.key, algorithm="ES256", headers={"kid": KID, **header})


async def initialize(http: httpx2.AsyncClient, url: str, token: str | None) -> httpx2.Response:
    headers = {**_JSON, **({"Authorization": f"Bearer {token}"} if token else {})}
    return await http.post(url, json=_INITIALIZE, headers=headers)


@pytest.mark.parametrize("era", ["legacy", "auto"])  # 2025-11-25 sessions; 2026-07-28
async def test_an_sdk_client_discovers_the_issuer_logs_in_and_calls_tools(
    issuer: Issuer, era: str
) -> None:
    landed: list[str] = []
    with anyio.fail_after(60):
        async with oauth_gateway(OAuthConfig(issuer=issuer.url, required_scopes=("mcp",))) as gw:
            async with sdk_client_logging_in(gw.url, "alice", landed, era) as mcp:
                names = {tool.name for tool in (await mcp.list_tools()).tools}
                result = await mcp.call_tool("fleet__status", {"sn": "A1"})
            async with httpx2.AsyncClient() as http:
                metadata = (
                    await http.get(
                        gw.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
                    )
                ).json()
                root = (
                    await http.get(gw.url.replace("/mcp", "/.well-known/oauth-protected-resource"))
                ).json()
                refused = await initialize(http, gw.url, None)
    assert len(landed) == 1  # one login, through the provider's redirects
    assert "fleet__status" in names
    assert result.structured_content == {"tool": "fleet__status", "arguments": {"sn": "A1"}}
    context = gw.provider.calls[-1][2]
    assert context is not None
    principal = gw.gateway.session_owner(context.session_id)
    assert principal  # the subject's digest, as tokens' are
    assert principal != "alice"
    assert metadata == root
    assert metadata["resource"] == gw.url
    assert metadata["authorization_servers"] == [issuer.url]  # spelt as the issuer spells it
    assert metadata["scopes_supported"] == ["mcp"]
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert (
        'resource_metadata="'
        + gw.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        + '"'
        in challenge
    )
    assert 'scope="mcp"' in challenge
    assert "error=" not in challenge  # no token at all: only the challenge (RFC 6750 §3.1)


async def test_each_kind_of_bad_token_gets_401_invalid_token_with_its_reason(
    issuer: Issuer,
) -> None:
    _, other_key = signing_key(KID)  # the issuer's kid, another key
    oauth = OAuthConfig(issuer=issuer.url, required_scopes=("mcp",), leeway_s=60)
    with anyio.fail_after(90):
        async with oauth_gateway(oauth, bearer_token="static-token") as gw:
            now = int(time.time())
            base = {"iss": issuer.url, "sub": "mallory", "aud": gw.url, "scope": "mcp"}
            fresh = {**base, "iat": now, "exp": now + 600}
            cases = {
                "expired": (sign(issuer, {**base, "exp": now - 3600}), "expired"),
                "not yet valid": (sign(issuer, {**fresh, "nbf": now + 3600}), "not valid yet"),
                "wrongly signed": (
                    jwt.encode(fresh, other_key, algorithm="ES256", headers={"kid": KID}),
                    "signature",
                ),
                "wrong audience": (
                    await issue_token(issuer.url, "http://127.0.0.1:1/mcp", "mallory"),
                    "not issued for this resource",
                ),
                "wrong issuer": (sign(issuer, {**fresh, "iss": "http://127.0.0.1:1"}), "issuer"),
                "alg none": (
                    jwt.encode(fresh, "", algorithm="none", headers={"kid": KID}),
                    "'none' is not accepted",
                ),
                "hmac": (jwt.encode(fresh, "x" * 32, algorithm="HS256"), "'HS256'"),
                "unknown kid": (sign(issuer, fresh, kid="rotated-away"), "no key"),
                "no subject": (sign(issuer, {k: v for k, v in fresh.items() if k != "sub"}), "sub"),
                "no expiry": (sign(issuer, base), "exp"),
                "expiry out of range": (sign(issuer, {**base, "exp": 10**400}), "out of range"),
                # another kind of JWT of the issuer (RFC 9068 §4, RFC 8725 §3.11)
                "not an access token": (sign(issuer, fresh, typ="dpop+jwt"), "typ"),
                "oversized": ("a" * 9000, "longer than 8192"),
                "malformed": ("a.b.c", "not a well-formed JWT"),
                "opaque without introspection": ("opaque-token-0123", "not a JWT"),
            }
            answers: dict[str, httpx2.Response] = {}
            async with httpx2.AsyncClient() as http:
                for kind, (token, _) in cases.items():
                    answers[kind] = await initialize(http, gw.url, token)
                within_leeway = await initialize(
                    http, gw.url, sign(issuer, {**base, "exp": now - 20})
                )
                short_of_scope = await initialize(
                    http,
                    gw.url,
                    await issue_token(issuer.url, gw.url, "mallory", scope="mcp:read"),
                )
                # typ JWT, as Keycloak and Entra ID send it (sign() leaves PyJWT's default)
                typ_jwt = await initialize(http, gw.url, sign(issuer, fresh))
                static = await initialize(http, gw.url, "static-token")
                good = await initialize(
                    http, gw.url, await issue_token(issuer.url, gw.url, "mallory")
                )
    for kind, (_, reason) in cases.items():
        answer = answers[kind]
        assert answer.status_code == 401, (kind, answer.status_code, answer.text)
        challenge = answer.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge, (kind, challenge)
        assert "resource_metadata=" in challenge
        assert reason in answer.json()["error_description"], (kind, answer.text)
        assert reason.replace('"', "'") in challenge, (kind, challenge)
    assert within_leeway.status_code == 200  # 20 s past exp, within the 60 s leeway
    assert short_of_scope.status_code == 403
    assert 'error="insufficient_scope"' in short_of_scope.headers["www-authenticate"]
    assert 'scope="mcp"' in short_of_scope.headers["www-authenticate"]
    assert typ_jwt.status_code == 200
    assert static.status_code == 200  # configured tokens keep working beside OAuth
    assert good.status_code == 200


async def test_scopes_select_the_first_matching_profile_in_config_order(issuer: Issuer) -> None:
    ops = Profile(name="ops", servers=frozenset({"other"}), scopes=frozenset({"mcp:ops"}))
    reader = Profile(
        name="reader", tools=frozenset({"fleet__status"}), scopes=frozenset({"mcp:read"})
    )
    oauth = OAuthConfig(issuer=issuer.url, required_scopes=("mcp",))
    seen: dict[str, set[str]] = {}
    with anyio.fail_after(60):
        async with oauth_gateway(oauth, (ops, reader)) as gw:
            for subject, scope in [
                ("both", "mcp mcp:read mcp:ops"),
                ("reader", "mcp mcp:read"),
                ("plain", "mcp"),
            ]:
                token = await issue_token(issuer.url, gw.url, subject, scope=scope)
                async with client(gw.url, token, mode="legacy") as mcp:
                    seen[subject] = {tool.name for tool in (await mcp.list_tools()).tools}
    assert seen["both"] == {"other__ping", "local_echo"}  # ops comes first in the config
    assert seen["reader"] == {"fleet__status"}
    assert {"fleet__status", "other__ping", "fleet__configure"} <= seen["plain"]  # no profile


async def test_two_subjects_never_see_each_others_sessions(issuer: Issuer) -> None:
    oauth = OAuthConfig(issuer=issuer.url, required_scopes=("mcp",))
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with anyio.fail_after(60):
        async with oauth_gateway(oauth) as gw, httpx2.AsyncClient() as http:
            alice = await issue_token(issuer.url, gw.url, "alice")
            alice_again = await issue_token(issuer.url, gw.url, "alice")  # a second login
            bob = await issue_token(issuer.url, gw.url, "bob")
            opened = await initialize(http, gw.url, alice)
            session = {
                **_JSON,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "Mcp-Protocol-Version": "2025-11-25",
            }
            await http.post(
                gw.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers={**session, "Authorization": f"Bearer {alice}"},
            )
            own = await http.post(
                gw.url, json=listing, headers={**session, "Authorization": f"Bearer {alice}"}
            )
            renewed = await http.post(
                gw.url, json=listing, headers={**session, "Authorization": f"Bearer {alice_again}"}
            )
            hijacked = await http.post(
                gw.url, json=listing, headers={**session, "Authorization": f"Bearer {bob}"}
            )
    assert alice != alice_again
    assert "fleet__status" in own.text
    assert "fleet__status" in renewed.text  # another token of the same subject: her session
    assert hijacked.status_code == 404  # as if the session did not exist
    assert "fleet__status" not in hijacked.text


@pytest.mark.parametrize("endpoint", ["discovered", "configured"])
async def test_opaque_tokens_are_checked_by_introspection(issuer: Issuer, endpoint: str) -> None:
    async with httpx2.AsyncClient() as http:
        metadata = (await http.get(f"{issuer.url}/.well-known/openid-configuration")).json()
    oauth = OAuthConfig(
        issuer=issuer.url,
        required_scopes=("mcp",),
        introspection_endpoint=(
            metadata["introspection_endpoint"] if endpoint == "configured" else None
        ),
        client_id="gateway",
        client_secret="gateway-secret",
    )
    with anyio.fail_after(60):
        async with oauth_gateway(oauth) as gw, httpx2.AsyncClient() as http:
            token = await issue_token(issuer.url, gw.url, "olive", client_id="tester-opaque")
            elsewhere = await issue_token(
                issuer.url, "http://127.0.0.1:1/mcp", "olive", client_id="tester-opaque"
            )
            revoked = await issue_token(issuer.url, gw.url, "olive", client_id="tester-opaque")
            await http.post(
                metadata["revocation_endpoint"],
                data={"token": revoked, "client_id": "tester-opaque"},
            )
            accepted = await initialize(http, gw.url, token)
            wrong_audience = await initialize(http, gw.url, elsewhere)
            inactive = await initialize(http, gw.url, revoked)
    assert token.count(".") != 2  # opaque indeed
    assert accepted.status_code == 200, accepted.text
    assert wrong_audience.status_code == 401
    assert "not issued for this resource" in wrong_audience.json()["error_description"]
    assert inactive.status_code == 401
    assert "not active" in inactive.json()["error_description"]


async def test_an_unreachable_authorization_server_fails_closed_with_a_log_line(
    issuer: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    with anyio.fail_after(60):
        async with httpx2.AsyncClient() as http:
            gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
            oauth = OAuthConfig(issuer=gone, required_scopes=("mcp",))
            async with oauth_gateway(oauth, bearer_token="static-token") as gw:
                now = int(time.time())
                claims = {"iss": gone, "sub": "s", "aud": gw.url, "exp": now + 60, "scope": "mcp"}
                with caplog.at_level(logging.WARNING, logger="sagents.gateway._oauth"):
                    refused = await initialize(http, gw.url, sign(issuer, claims))
                    again = await initialize(http, gw.url, sign(issuer, claims))
                static = await initialize(http, gw.url, "static-token")
    assert refused.status_code == 503
    assert refused.json()["error"] == "temporarily_unavailable"
    assert again.status_code == 503  # still closed, without trying again at once
    logged = [r.getMessage() for r in caplog.records if r.name == "sagents.gateway._oauth"]
    assert len(logged) == 1
    assert gone in logged[0]
    assert "refused until it answers" in logged[0]
    assert static.status_code == 200  # the gateway keeps serving


async def test_the_console_logs_in_through_the_authorization_server(issuer: Issuer) -> None:
    oauth = OAuthConfig(
        issuer=issuer.url,
        required_scopes=("mcp",),
        client_id="gateway",
        client_secret="gateway-secret",
    )
    with anyio.fail_after(60):
        async with oauth_gateway(oauth) as gw, httpx2.AsyncClient() as browser:
            console = gw.url.removesuffix("/mcp") + "/console"
            page = await browser.get(f"{console}/login")
            started = await browser.get(f"{console}/oauth/login")
            landed = await browse(started.headers["location"], "carol", console)
            done = await browser.get(landed)
            runs = await browser.get(f"{console}/runs")
            # a second login whose state cookie is missing (another browser) is refused
            again = await browser.get(f"{console}/oauth/login")
            elsewhere = await browse(again.headers["location"], "mallory", console)
            async with httpx2.AsyncClient() as other_browser:
                refused = await other_browser.get(elsewhere)
                replayed = await browser.get(landed)  # a state is used once
    assert 'id="oauth-login"' in page.text
    assert started.status_code == 303
    assert landed.startswith(f"{console}/oauth/callback?code=")
    assert done.status_code == 303
    assert done.headers["location"] == "/console/runs"
    assert runs.status_code == 200
    assert "session token" in runs.text  # carol's own principal, not the operator
    assert "operator" not in runs.text.split('class="who">', 1)[1].split("<", 1)[0]
    assert refused.status_code == 401
    assert "another browser" in refused.text
    assert replayed.status_code == 401
    assert "expired or was not started here" in replayed.text

"""The ``oauth`` section: the values it becomes, and bad values refused naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from sagents.cli._serve import resolve_settings
from sagents.cli.main import app
from sagents.config import parse_config
from sagents.config._oauth import ALLOWED_ALGORITHMS, DEFAULT_LEEWAY_S, OAuthConfig
from sagents.errors import ConfigError
from sagents.gateway._factory import EmptyProvider
from sagents.gateway._http_server import build_http_app
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings
from sagents.mcp import StreamableHttpServerParameters, UpstreamOAuth

ISSUER = "https://idp.example.com"


def test_the_oauth_section_becomes_the_oauth_config() -> None:
    oauth = parse_config(
        {
            "oauth": {
                "issuer": ISSUER,
                "audience": "https://gw.example.com/mcp",
                "requiredScopes": ["mcp"],
                "publicUrl": "https://gw.example.com/",
                "introspectionEndpoint": "https://idp.example.com/introspect",
                "clientId": "gateway",
                "clientSecretEnv": "GW_SECRET",
                "algorithms": ["ES256"],
                "leewaySec": 30,
            }
        },
        environ={"GW_SECRET": "s3cret"},
    ).oauth
    assert oauth == OAuthConfig(
        issuer=ISSUER,
        audience="https://gw.example.com/mcp",
        required_scopes=("mcp",),
        public_url="https://gw.example.com",
        introspection_endpoint="https://idp.example.com/introspect",
        client_id="gateway",
        client_secret="s3cret",
        algorithms=("ES256",),
        leeway_s=30,
    )
    assert "s3cret" not in repr(oauth)
    minimal = parse_config({"oauth": {"issuer": "http://127.0.0.1:9000"}}).oauth
    assert minimal == OAuthConfig(issuer="http://127.0.0.1:9000")
    assert minimal.algorithms == ALLOWED_ALGORITHMS
    assert minimal.leeway_s == DEFAULT_LEEWAY_S
    assert parse_config({}).oauth is None


@pytest.mark.parametrize(
    ("section", "key", "says"),
    [
        ({"issuer": "http://idp.example.com"}, "oauth.issuer", "must use https"),
        ({"issuer": "idp.example.com"}, "oauth.issuer", "not an absolute"),
        ({"issuer": ISSUER, "publicUrl": "http://gw.example.com"}, "oauth.publicUrl", "https"),
        ({"issuer": ISSUER, "algorithms": ["none"]}, "oauth.algorithms", "'none'"),
        ({"issuer": ISSUER, "algorithms": ["HS256"]}, "oauth.algorithms", "'HS256'"),
        ({"issuer": ISSUER, "algorithms": []}, "oauth.algorithms", "no algorithm"),
        ({"issuer": ISSUER, "leewaySec": 3600}, "oauth.leewaySec", "more than 300"),
        ({"issuer": ISSUER, "leewaySec": -1}, "oauth.leewaySec", "greater than or equal"),
        ({"issuer": ISSUER, "requiredScopes": ["a b"]}, "oauth.requiredScopes", "one non-empty"),
        (
            {"issuer": ISSUER, "introspectionEndpoint": f"{ISSUER}/introspect"},
            "oauth.introspectionEndpoint",
            "client credentials",
        ),
        ({"issuer": ISSUER, "clientId": "gw"}, "oauth.clientSecretEnv", "clientSecretEnv"),
        (
            {"issuer": ISSUER, "clientId": "gw", "clientSecretEnv": "UNSET_VAR"},
            "oauth.clientSecretEnv",
            "'UNSET_VAR' is not set",
        ),
        ({"issuer": ISSUER, "requiredScope": ["mcp"]}, "oauth.requiredScope", "requiredScopes"),
        ({"audience": "x"}, "oauth.issuer", "Field required"),
    ],
)
def test_a_bad_oauth_value_is_refused_naming_its_key(
    section: dict[str, Any], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"oauth": section}, file="gw.json", environ={})
    assert caught.value.details["key"] == key
    assert says in str(caught.value)
    assert "gw.json" in str(caught.value)


def _serve(config: Path, **extra: object) -> GatewaySettings:
    base: dict[str, object] = {
        "config": config, "profile": None, "transport": "http", "host": "127.0.0.1",
        "port": 0, "mode": None, "workspace": None, "background_after": None,
        "allowed_hosts": [],
    }  # fmt: skip
    base.update(extra)
    return resolve_settings(**base)  # type: ignore[arg-type]


def test_a_public_bind_with_oauth_needs_the_public_url(tmp_path: Path) -> None:
    config = tmp_path / "gw.json"
    config.write_text(json.dumps({"oauth": {"issuer": ISSUER}}))
    with pytest.raises(ConfigError, match="needs the gateway's public URL") as caught:
        _serve(config, host="0.0.0.0")
    assert caught.value.details["key"] == "oauth.publicUrl"
    settings = _serve(config, host="0.0.0.0", public_url="https://gw.example.com/")
    assert settings.public_url == "https://gw.example.com"  # OAuth alone: no static token needed
    assert settings.oauth is not None
    with pytest.raises(ConfigError, match="must use https"):
        _serve(config, host="0.0.0.0", public_url="http://gw.example.com")
    config.write_text(
        json.dumps({"oauth": {"issuer": ISSUER, "publicUrl": "https://from.config.example"}})
    )
    assert _serve(config, host="0.0.0.0").public_url == "https://from.config.example"
    assert (
        _serve(config, host="0.0.0.0", public_url="https://flag.example").public_url
        == "https://flag.example"
    )  # --public-url wins


def test_the_public_url_names_the_resource_and_its_host_is_served(tmp_path: Path) -> None:
    config = tmp_path / "gw.json"
    config.write_text(
        json.dumps(
            {
                "oauth": {
                    "issuer": ISSUER,
                    "requiredScopes": ["mcp"],
                    "publicUrl": "https://gw.example.com",
                },
                "profiles": {"ops": {"scopes": ["mcp:ops"]}, "plain": {}},
            }
        )
    )
    settings = _serve(config, host="0.0.0.0", port=8765)
    assert [p.name for p in settings.scope_profiles] == ["ops"]
    gateway = Gateway(EmptyProvider())
    with TestClient(build_http_app(gateway, settings, port=8765)) as http:
        metadata = http.get(
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
            headers={"Host": "gw.example.com", "Origin": "https://gw.example.com"},
        )
        refused = http.post("/mcp", headers={"Host": "gw.example.com"}, json={})
        preflight = http.options(
            "/.well-known/oauth-protected-resource",
            headers={
                "Host": "gw.example.com",
                "Origin": "https://gw.example.com",
                "Access-Control-Request-Method": "GET",
            },
        )
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == "https://gw.example.com/mcp"
    assert metadata.json()["authorization_servers"] == [ISSUER]
    assert metadata.headers["access-control-allow-origin"] == "*"  # browser-based clients
    assert preflight.status_code == 200
    assert refused.status_code == 401
    assert (
        'resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"'
        in refused.headers["www-authenticate"]
    )


def test_sagents_serve_refuses_a_public_bind_with_oauth_but_no_public_url(tmp_path: Path) -> None:
    config = tmp_path / "gw.json"
    config.write_text(json.dumps({"oauth": {"issuer": ISSUER}}))
    command = ["serve", "--config", str(config), "--transport", "http", "--host", "0.0.0.0"]
    refused = CliRunner().invoke(app, command)
    assert refused.exit_code == 2
    assert "needs the gateway's public URL" in refused.output
    assert "oauth.publicUrl" in refused.output


def test_an_upstream_servers_auth_keys_become_its_oauth_settings() -> None:
    entry = {"url": "https://mcp.example.com/mcp", "auth": "oauth"}
    plain = parse_config({"mcpServers": {"gh": entry}}).servers[0].params
    chosen = (
        parse_config(
            {"mcpServers": {"gh": {**entry, "clientId": "sagents", "scopes": ["repo", "read:org"]}}}
        )
        .servers[0]
        .params
    )
    assert isinstance(plain, StreamableHttpServerParameters)
    assert plain.oauth == UpstreamOAuth()
    assert isinstance(chosen, StreamableHttpServerParameters)
    assert chosen.oauth == UpstreamOAuth(client_id="sagents", scopes=("repo", "read:org"))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"url": "https://x.example/sse", "auth": "oauth"}, "Streamable HTTP transport, not SSE"),
        ({"url": "https://x.example/mcp", "auth": "oauth", "apiKey": "k"}, "drop 'apiKey'"),
        (
            {"url": "https://x.example/mcp", "auth": "oauth", "headers": {"authorization": "x"}},
            "the 'Authorization' header",
        ),
        ({"url": "https://x.example/mcp", "clientId": "c"}, 'need "auth": "oauth"'),
        ({"url": "https://x.example/mcp", "auth": "basic"}, "auth"),
        ({"command": "server", "auth": "oauth"}, "auth"),
    ],
)
def test_a_bad_upstream_auth_is_refused_naming_the_server(
    entry: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_config({"mcpServers": {"gh": entry}}, file="gw.json")
    assert "mcpServers.gh" in caught.value.message

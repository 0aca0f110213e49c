"""``--approvals``, ``--no-console`` and the TLS rule for the console beyond loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagents.cli._console import console_settings
from sagents.cli._serve import resolve_settings
from sagents.cli.main import app
from sagents.errors import ConfigError
from sagents.gateway._factory import EmptyProvider
from sagents.gateway._http_server import build_http_app, console_allowed
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings


def settings(**extra: object) -> GatewaySettings:
    base: dict[str, object] = {
        "config": None, "profile": None, "transport": "http", "host": "127.0.0.1", "port": 0,
        "mode": None, "workspace": None, "background_after": None, "allowed_hosts": [],
    }  # fmt: skip
    base.update(extra)
    return resolve_settings(**base)  # type: ignore[arg-type]


def test_approvals_default_to_elicitation_and_accept_console_and_both() -> None:
    assert settings().approvals == "elicitation"
    assert settings(approvals="console").approvals == "console"
    assert settings(approvals="both").approvals == "both"


def test_an_unknown_approvals_route_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="use console, elicitation, both"):
        settings(approvals="terminal")


def test_console_approvals_need_the_console_over_http() -> None:
    with pytest.raises(ConfigError, match="needs the web console") as stdio:
        settings(transport="stdio", approvals="console")
    with pytest.raises(ConfigError, match="needs the web console"):
        settings(approvals="both", console=False)
    assert "--approvals" in str(stdio.value)


def test_a_tls_certificate_needs_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="go together"):
        settings(tls_cert=tmp_path / "cert.pem")


def test_the_console_is_served_beyond_loopback_only_over_tls() -> None:
    public = GatewaySettings(transport="http", host="0.0.0.0", bearer_token="t")
    assert console_allowed(GatewaySettings(transport="http")) is True
    assert console_allowed(public) is False
    assert console_allowed(GatewaySettings(transport="http", host="0.0.0.0", bearer_token="t",
                                           tls_proxy=True)) is True  # fmt: skip
    assert console_allowed(GatewaySettings(transport="http", console=False)) is False


def test_without_tls_a_public_gateway_serves_mcp_and_leaves_the_console_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from starlette.testclient import TestClient

    public = GatewaySettings(transport="http", host="10.1.2.3", port=8765, bearer_token="t")
    asgi = build_http_app(Gateway(EmptyProvider()), public, port=8765)
    with TestClient(asgi, base_url="http://10.1.2.3:8765") as http:
        page = http.get("/console/runs", headers={"Authorization": "Bearer t"})
    assert page.status_code == 404
    assert "not served on 10.1.2.3 without TLS" in caplog.text


def test_sagents_console_refuses_a_public_bind_without_token_or_tls(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    no_token = CliRunner().invoke(
        app, ["console", "--data-dir", str(tmp_path), "--host", "0.0.0.0"]
    )
    monkeypatch.setenv("SAGENTS_GATEWAY_TOKEN", "t")
    with pytest.raises(ConfigError, match="over plain HTTP"):
        console_settings(host="0.0.0.0", port=0, tls_cert=None, tls_key=None, tls_proxy=False)
    proxied = console_settings(host="0.0.0.0", port=0, tls_cert=None, tls_key=None,
                               tls_proxy=True)  # fmt: skip
    missing = CliRunner().invoke(app, ["console", "--data-dir", str(tmp_path / "nope")])
    assert no_token.exit_code == 2
    assert "without a token" in no_token.output
    assert proxied.bearer_token == "t"
    assert missing.exit_code == 2
    assert "no such directory" in missing.output

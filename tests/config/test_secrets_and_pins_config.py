"""The configuration keys of secrets and definition pinning (docs/configuration.md)."""

from __future__ import annotations

from typing import Any

import pytest

from sagents.config import parse_config
from sagents.errors import ConfigError
from sagents.gateway._policy import Profile
from sagents.gateway._secrets import (
    OAUTH_SECRET_NAME,
    OPERATOR_SECRET_NAME,
    TOKEN_NAME,
    gateway_redactor,
)
from sagents.gateway._settings import GatewaySettings

ENV = {"API": "api-key-value-1", "HDR": "header-value-1", "PGPASS": "pg-pass-word-1"}


def _config(**extra: Any) -> dict[str, Any]:
    return {
        "mcpServers": {
            "local": {"command": "x", "env": {"KEY": "${API}", "PLAIN": "plain-value-1"}},
            "remote": {"url": "http://h/mcp", "headers": {"X": "${env:HDR}"}},
        },
        **extra,
    }


def test_every_expanded_variable_the_store_password_and_the_secrets_block_are_secrets() -> None:
    config = parse_config(
        _config(
            store={"url": "postgresql://u:${PGPASS}@h/db"},
            secrets={"values": {"EXTRA": "extra-value-1"}, "env": ["HDR", "UNSET"]},
        ),
        environ=ENV,
    )
    found = dict(config.secrets)
    assert found == {
        "API": "api-key-value-1",
        "HDR": "header-value-1",
        "PGPASS": "pg-pass-word-1",
        "store.password": "pg-pass-word-1",
        "EXTRA": "extra-value-1",
    }
    assert "plain-value-1" not in found.values()  # written in the file, not a ${VAR}
    assert "pg-pass-word-1" not in repr(config)


def test_a_password_written_into_the_store_url_is_a_secret() -> None:
    config = parse_config(_config(store={"url": "postgresql://u:p%40ss-word@h/db"}), environ=ENV)
    assert ("store.password", "p@ss-word") in config.secrets


def test_the_gateway_redacts_its_tokens_by_name() -> None:
    oauth = {"issuer": "https://idp.example.com", "clientId": "gw", "clientSecretEnv": "OAUTH"}
    config = parse_config(_config(oauth=oauth), environ={**ENV, "OAUTH": "oauth-secret-1"})
    settings = GatewaySettings(
        bearer_token="operator-token-1", token_profiles={"profile-token-1": Profile(name="ops")}
    )
    redactor = gateway_redactor(config, settings)
    redactor.add([(OPERATOR_SECRET_NAME, "the-operator-secret")])
    text = redactor.redact(
        "operator-token-1 profile-token-1 the-operator-secret api-key-value-1 oauth-secret-1"
    )
    assert text == (
        f"[redacted:{TOKEN_NAME}] [redacted:token:ops] [redacted:{OPERATOR_SECRET_NAME}] "
        f"[redacted:API] [redacted:{OAUTH_SECRET_NAME}]"
    )


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"secrets": {"values": ["a"]}}, "secrets.values"),
        ({"secrets": {"env": "A"}}, "secrets.env"),
        ({"secrets": {"valeus": {}}}, "secrets.valeus"),
    ],
)
def test_a_bad_secrets_block_names_its_key(extra: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(**extra), environ=ENV)
    assert caught.value.details.get("key", "").startswith(key)


def test_on_definition_change_is_read_per_server_and_checked() -> None:
    document = _config()
    document["mcpServers"]["local"]["onDefinitionChange"] = "disable"
    config = parse_config(document, environ=ENV)
    settings = {server.name: server.settings for server in config.servers}
    document["mcpServers"]["remote"]["onDefinitionChange"] = "ignore"
    with pytest.raises(ConfigError) as caught:
        parse_config(document, environ=ENV)
    assert settings["local"].on_definition_change == "disable"
    assert settings["remote"].on_definition_change == "ask"
    assert caught.value.details.get("key") == "mcpServers.remote.onDefinitionChange"

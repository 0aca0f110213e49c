"""Profiles from the config file, ``serve`` options, and the bind rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagents.cli._serve import resolve_settings
from sagents.errors import ConfigError
from sagents.gateway._http_server import check_bind
from sagents.gateway._settings import GatewaySettings, is_loopback, load_profiles, token_profiles


def write_config(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def resolve(**overrides: object) -> GatewaySettings:
    options: dict[str, object] = {
        "config": None,
        "profile": None,
        "transport": "stdio",
        "host": "127.0.0.1",
        "port": 0,
        "mode": None,
        "workspace": None,
        "background_after": None,
        "allowed_hosts": [],
    }
    options.update(overrides)
    return resolve_settings(**options)  # type: ignore[arg-type]


def test_profiles_load_with_their_fields(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "mcpServers": {},
            "profiles": {
                "ops": {
                    "servers": ["fleet"],
                    "tools": ["fleet__status"],
                    "skills": ["triage"],
                    "mode": "read-only",
                    "bearerTokenEnv": "OPS_TOKEN",
                }
            },
        },
    )
    ops = load_profiles(config)["ops"]
    assert ops.servers == frozenset({"fleet"})
    assert ops.tools == frozenset({"fleet__status"})
    assert ops.skills == frozenset({"triage"})
    assert ops.mode == "read_only"
    assert ops.bearer_token_env == "OPS_TOKEN"


def test_a_config_without_profiles_has_none(tmp_path: Path) -> None:
    assert load_profiles(write_config(tmp_path, {"mcpServers": {}})) == {}


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"profiles": {"ops": {"mode": "yolo"}}}, "profiles.ops.mode"),
        ({"profiles": {"ops": {"servers": "fleet"}}}, "profiles.ops.servers"),
        ({"profiles": {"ops": {"color": "red"}}}, "profiles.ops.color"),
        ({"profiles": []}, "profiles"),
    ],
)
def test_a_bad_profile_names_the_file_and_key(tmp_path: Path, data: object, key: str) -> None:
    config = write_config(tmp_path, data)
    with pytest.raises(ConfigError) as caught:
        load_profiles(config)
    assert caught.value.details == {"file": str(config), "key": key}


def test_invalid_json_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text("{nope", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid JSON"):
        load_profiles(config)


def test_profile_option_picks_the_profile_and_its_mode(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"profiles": {"ro": {"mode": "read_only"}}})
    settings = resolve(config=config, profile="ro")
    assert settings.profile is not None
    assert settings.profile.name == "ro"
    assert settings.mode == "read_only"
    assert resolve(config=config, profile="ro", mode="auto").mode == "auto"  # the flag wins


def test_an_unknown_profile_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"profiles": {"ro": {}}})
    with pytest.raises(ConfigError, match="unknown profile 'rw'"):
        resolve(config=config, profile="rw")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("transport", "sse", "unknown transport"),
        ("mode", "yolo", "unknown permission mode"),
        ("background_after", -1.0, "0 or more"),
    ],
)
def test_bad_options_are_refused(option: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(**{option: value})


def test_binding_a_non_loopback_host_without_a_token_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"refusing to bind '0\.0\.0\.0' without a bearer token"):
        resolve(transport="http", host="0.0.0.0")


def test_binding_a_non_loopback_host_with_a_token_is_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGENTS_GATEWAY_TOKEN", "s3cret")
    settings = resolve(transport="http", host="0.0.0.0")
    assert settings.bearer_token == "s3cret"
    check_bind(settings)


def test_token_profiles_read_their_tokens_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_TOKEN", "t-ops")
    monkeypatch.setenv("DEV_TOKEN", "t-ops")
    config = write_config(
        tmp_path,
        {"profiles": {"ops": {"bearerTokenEnv": "OPS_TOKEN"}, "dev": {"bearerTokenEnv": "X"}}},
    )
    bound = token_profiles(load_profiles(config))
    assert {token: p.name for token, p in bound.items()} == {"t-ops": "ops"}
    clash = write_config(
        tmp_path,
        {"profiles": {"a": {"bearerTokenEnv": "OPS_TOKEN"}, "b": {"bearerTokenEnv": "DEV_TOKEN"}}},
    )
    with pytest.raises(ConfigError, match="same bearer token"):
        token_profiles(load_profiles(clash))


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback

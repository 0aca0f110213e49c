"""One spelling per key: the documented camelCase one. A field's Python (snake_case) name is
refused with an error naming the documented key; other clients' aliases stay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sagents.config import parse_config
from sagents.config._models import ScriptsParams
from sagents.errors import ConfigError
from sagents.gateway._settings import load_profiles

SERVER = {"command": "python"}


@pytest.mark.parametrize(
    ("data", "key", "documented"),
    [
        ({"mcpServers": {"a": {**SERVER, "call_timeout": 5}}}, "mcpServers.a.call_timeout",
         "callTimeout"),
        ({"mcpServers": {"a": {**SERVER, "sandbox": {"memory_mb": 5}}}},
         "mcpServers.a.sandbox.memory_mb", "memoryMb"),
        ({"scripts": {"max_calls": 5}}, "scripts.max_calls", "maxCalls"),
        ({"background_calls": {"autoAfterSec": 5}}, "background_calls", "backgroundCalls"),
        ({"mcp_servers": {"a": SERVER}}, "mcp_servers", "mcpServers"),
        ({"builtinTools": {"web_fetch": {}}}, "builtinTools.web_fetch", "webFetch"),
        ({"builtinTools": {"webFetch": {"max_bytes": 5}}}, "builtinTools.webFetch.max_bytes",
         "maxBytes"),
        ({"store": {"lease_seconds": 5}}, "store.lease_seconds", "leaseSec"),
    ],
)  # fmt: skip
def test_a_snake_case_key_is_refused_naming_the_documented_one(
    data: dict[str, Any], key: str, documented: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert raised.value.details["key"] == key
    assert f"spells it {documented!r}" in raised.value.message
    assert raised.value.hint is not None
    assert f"rename it to {documented!r}" in raised.value.hint


def test_the_scripts_block_on_its_own_names_the_documented_key() -> None:
    with pytest.raises(ConfigError, match="spells it 'timeoutSec'") as raised:
        ScriptsParams.parse({"timeout_sec": 5})
    assert raised.value.details["key"] == "scripts.timeout_sec"


def test_a_profile_key_in_snake_case_names_the_documented_one(tmp_path: Path) -> None:
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps({"profiles": {"ops": {"bearer_token_env": "OPS"}}}))
    with pytest.raises(ConfigError, match="spells it 'bearerTokenEnv'") as raised:
        load_profiles(config)
    assert raised.value.details["key"] == "profiles.ops.bearer_token_env"


@pytest.mark.parametrize(
    "entry",
    [
        {**SERVER, "disabled": True},
        {**SERVER, "enabled": False},
    ],
)
def test_disabled_and_enabled_are_both_read(entry: dict[str, Any]) -> None:
    config = parse_config({"mcpServers": {"off": entry}})
    assert config.disabled == ("off",)


@pytest.mark.parametrize("key", ["type", "transport"])
def test_type_and_transport_are_both_read(key: str) -> None:
    config = parse_config({"mcpServers": {"web": {"url": "http://127.0.0.1:1/x", key: "sse"}}})
    assert type(config.servers[0].params).__name__ == "SseServerParameters"


def test_the_documented_keys_still_load() -> None:
    config = parse_config(
        {
            "mcpServers": {"a": {**SERVER, "callTimeout": 5, "sandbox": {"memoryMb": 5}}},
            "scripts": {"maxCalls": 5},
            "backgroundCalls": {"autoAfterSec": 5},
            "store": {"leaseSec": 5},
        }
    )
    assert config.servers[0].settings.call_timeout == 5
    assert config.scripts.max_calls == 5
    assert config.background_calls.auto_after_sec == 5
    assert config.store_lease_s == 5

"""The ``quotas`` section: the values it becomes, and bad values refused naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from sagents.config import QuotaSettings, parse_config
from sagents.errors import ConfigError


def test_the_quotas_block_becomes_the_quota_settings() -> None:
    quotas = parse_config(
        {
            "quotas": {
                "workspaceBytes": 1_000_000,
                "principalBytes": 5_000_000,
                "backgroundTasksPerSession": 3,
            }
        }
    ).quotas
    assert quotas == QuotaSettings(
        workspace_bytes=1_000_000, principal_bytes=5_000_000, background_tasks_per_session=3
    )
    assert parse_config({}).quotas == QuotaSettings()  # unset: no quota


@pytest.mark.parametrize("key", ["workspaceBytes", "principalBytes", "backgroundTasksPerSession"])
@pytest.mark.parametrize("value", [-1, 0, "100", 1.5, True, [1]])
def test_a_bad_quota_is_refused_naming_its_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"quotas": {key: value}}, file="gw.json")
    assert caught.value.details["key"] == f"quotas.{key}"
    assert f"quotas.{key}" in str(caught.value)
    assert "gw.json" in str(caught.value)


def test_an_unknown_quota_key_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="workspaceBytes") as caught:
        parse_config({"quotas": {"workspaceByte": 5}})
    assert caught.value.details["key"] == "quotas.workspaceByte"


def test_a_snake_case_quota_key_is_refused_and_named() -> None:
    with pytest.raises(ConfigError, match="'workspaceBytes'"):
        parse_config({"quotas": {"workspace_bytes": 5}})


def test_a_sandboxed_servers_home_is_held_to_the_workspace_quota() -> None:
    """A sandboxed server's home is something the host stores for the gateway's sessions: it is
    charged to ``quotas.workspaceBytes`` like a session's workspace."""
    document = {
        "mcpServers": {
            "boxed": {"command": "/bin/true", "sandbox": {}},
            "plain": {"command": "/bin/true"},
        },
        "quotas": {"workspaceBytes": 1_000_000},
    }
    servers = {server.name: server for server in parse_config(document).servers}
    boxed = servers["boxed"].settings.sandbox
    assert boxed is not None
    assert boxed.home_bytes == 1_000_000
    assert servers["plain"].settings.sandbox is None
    unbounded = parse_config({"mcpServers": {"boxed": {"command": "/bin/true", "sandbox": {}}}})
    box = unbounded.servers[0].settings.sandbox
    assert box is not None
    assert box.home_bytes is None

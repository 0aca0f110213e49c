"""The ``sandbox`` block of a stdio server entry: its values, and a clear error for each bad one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sagents.config import load_config
from sagents.errors import ConfigError
from sagents.mcp import ServerSandbox
from sagents.sandbox import NetworkPolicy


def _load(tmp_path: Path, entry: dict[str, Any]) -> ServerSandbox | None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"files": entry}}))
    return load_config(path).servers[0].settings.sandbox


def _error(tmp_path: Path, entry: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, entry)
    return caught.value


def test_a_full_block_becomes_the_servers_sandbox(tmp_path: Path) -> None:
    block = {
        "network": True,
        "readable": ["/opt/mcp", "code"],
        "writable": ["~/data"],
        "env": ["GITHUB_TOKEN"],
        "home": "/var/lib/fs-home",
        "memoryMb": 256,
        "cpuSec": 60,
        "cpuCores": 0.5,
        "maxProcesses": 8,
        "uid": 1000,
    }
    sandbox = _load(tmp_path, {"command": "node", "sandbox": block})
    assert sandbox == ServerSandbox(
        network=NetworkPolicy(),  # any public host
        readable=("/opt/mcp", str(tmp_path / "code")),
        writable=(str(Path("~/data").expanduser()),),
        env=("GITHUB_TOKEN",),
        home="/var/lib/fs-home",
        memory_mb=256,
        cpu_seconds=60,
        cpu_cores=0.5,
        max_processes=8,
        uid=1000,
        config_file=str(tmp_path / "servers.json"),
        config_has_secrets=False,
    )


def test_true_is_a_sandbox_with_every_default_and_false_or_nothing_is_none(
    tmp_path: Path,
) -> None:
    config = str(tmp_path / "servers.json")
    default = ServerSandbox(config_file=config, config_has_secrets=False)
    assert _load(tmp_path, {"command": "node", "sandbox": True}) == default
    assert _load(tmp_path, {"command": "node", "sandbox": False}) is None
    assert _load(tmp_path, {"command": "node"}) is None
    defaults = ServerSandbox()
    assert (defaults.network, defaults.memory_mb, defaults.max_processes) == (False, 1024, 64)
    assert defaults.cpu_seconds is None  # a server lives long: no CPU-time limit by default


def test_an_unknown_key_names_the_closest_known_one(tmp_path: Path) -> None:
    error = _error(tmp_path, {"command": "node", "sandbox": {"writeable": ["/srv"]}})
    assert "did you mean 'writable'?" in error.message
    assert error.details["key"] == "mcpServers.files.sandbox.writeable"
    assert error.details["file"] == str(tmp_path / "servers.json")


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ({"readable": ["/"]}, "would show the whole host"),
        ({"writable": ["/srv"], "readable": ["/srv/code"]}, "lies inside the writable path"),
        ({"writable": ["/srv", "/srv/data"]}, "lies inside the writable path"),
        ({"env": ["NOT A NAME"]}, "is not a variable name"),
    ],
)
def test_an_unusable_value_is_refused_with_the_reason(
    tmp_path: Path, block: dict[str, Any], words: str
) -> None:
    error = _error(tmp_path, {"command": "node", "sandbox": block})
    assert words in error.message
    assert error.details["key"] == "mcpServers.files.sandbox"


@pytest.mark.parametrize("key", ["memoryMb", "cpuSec", "cpuCores", "maxProcesses"])
def test_a_limit_must_be_positive(tmp_path: Path, key: str) -> None:
    error = _error(tmp_path, {"command": "node", "sandbox": {key: 0}})
    assert error.details["key"] == f"mcpServers.files.sandbox.{key}"


def test_a_remote_server_cannot_have_a_sandbox(tmp_path: Path) -> None:
    error = _error(tmp_path, {"url": "https://mcp.example.com/mcp", "sandbox": True})
    assert "only to stdio servers" in error.message
    assert error.details["key"] == "mcpServers.files.sandbox"


@pytest.mark.parametrize("where", ["writable", "home"])
def test_a_sandbox_may_not_write_the_config_files_directory(tmp_path: Path, where: str) -> None:
    value: Any = str(tmp_path) if where == "home" else [str(tmp_path)]
    error = _error(tmp_path, {"command": "node", "sandbox": {where: value}})
    assert "config file" in error.message
    assert str(tmp_path / "servers.json") in error.message
    assert error.details["key"].startswith(f"mcpServers.files.sandbox.{where}")


def test_a_relative_writable_path_below_the_config_is_refused_too(tmp_path: Path) -> None:
    error = _error(tmp_path, {"command": "node", "sandbox": {"writable": ["."]}})
    assert "config file" in error.message


@pytest.mark.parametrize(
    ("entry", "secret"),
    [
        ({"env": {"GITHUB_TOKEN": "ghp_written_in"}}, True),
        ({"env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}, False),
        ({}, False),
    ],
)
def test_a_readable_path_may_show_the_config_file_only_when_it_holds_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, Any], secret: bool
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_from_the_environment")
    block = {"command": "node", **entry, "sandbox": {"readable": [str(tmp_path)]}}
    if not secret:
        sandbox = _load(tmp_path, block)
        assert sandbox is not None
        assert sandbox.config_has_secrets is False
        return
    error = _error(tmp_path, block)
    assert "holds secrets" in error.message
    assert str(tmp_path / "servers.json") in error.message
    assert error.details["key"] == "mcpServers.files.sandbox.readable.0"
    assert error.hint is not None
    assert "${NAME}" in error.hint


def test_a_secret_of_another_server_or_of_the_store_counts_too(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    shown = {"command": "node", "sandbox": {"readable": [str(tmp_path)]}}
    remote = {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}}
    for document in (
        {"mcpServers": {"files": shown, "remote": remote}},
        {"mcpServers": {"files": shown}, "store": {"url": "postgresql://u:pw@db/sagents"}},
    ):
        path.write_text(json.dumps(document))
        with pytest.raises(ConfigError, match="holds secrets"):
            load_config(path)


def test_a_network_allowlist_becomes_the_servers_network_policy(tmp_path: Path) -> None:
    allow = ["api.github.com", "*.example.org", "10.1.0.0/16", "127.0.0.1:5432", "[::1]:8080", "*"]
    block = {"command": "node", "sandbox": {"network": {"allow": allow}}}
    sandbox = _load(tmp_path, block)
    assert sandbox is not None
    assert sandbox.network == NetworkPolicy(allow=tuple(allow))


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("http://api.github.com", "is a URL"),
        ("api.github.com/path", "is not a network"),
        ("127.0.0.1:99999", "a port is 1 to 65535"),
        ("127.0.0.1:", "a port is 1 to 65535"),
        ("10.1.2.3/16", "has host bits set"),
        ("bad host", "is not a host name"),
        ("", "is not a host name"),
        ("[::1]80", "is not a host name"),
        ("1.2.3", "is not a host name"),
    ],
)
def test_a_malformed_allowlist_entry_is_refused_naming_its_key(
    tmp_path: Path, entry: str, words: str
) -> None:
    block = {"network": {"allow": ["api.github.com", entry]}}
    error = _error(tmp_path, {"command": "node", "sandbox": block})
    assert error.details["key"] == "mcpServers.files.sandbox.network.allow.1"
    assert words in error.message
    assert repr(entry) in error.message


@pytest.mark.parametrize(
    ("network", "key"),
    [
        ({"allow": []}, "mcpServers.files.sandbox.network.allow"),
        ({"allowed": ["x.org"]}, "mcpServers.files.sandbox.network.allow"),  # missing
        ({"allow": ["x.org"], "deny": ["y.org"]}, "mcpServers.files.sandbox.network.deny"),
        ("yes", "mcpServers.files.sandbox.network"),
    ],
)
def test_a_malformed_network_block_is_refused_naming_its_key(
    tmp_path: Path, network: object, key: str
) -> None:
    error = _error(tmp_path, {"command": "node", "sandbox": {"network": network}})
    assert error.details["key"] == key

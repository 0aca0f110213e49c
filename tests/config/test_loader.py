import json
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from sagents.config import load_config, parse_config
from sagents.errors import ConfigError
from sagents.mcp import SseServerParameters, StreamableHttpServerParameters


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_claude_desktop_file_loads_unchanged(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "mcpServers": {
                "filesystem": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                    "env": {"DEBUG": "1"},
                    "cwd": "/tmp",
                }
            },
            "globalShortcut": "ignored by sagents",
        },
    )
    config = load_config(path)
    (server,) = config.servers
    assert server.name == "filesystem"
    assert server.params == StdioServerParameters(
        command="npx",
        args=["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
        env={"DEBUG": "1"},
        cwd="/tmp",
    )
    assert config.source == path


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ({"url": "http://127.0.0.1:1/sse", "type": "sse"}, SseServerParameters),
        ({"url": "http://127.0.0.1:1/sse"}, SseServerParameters),
        ({"url": "http://127.0.0.1:1/mcp", "type": "http"}, StreamableHttpServerParameters),
        ({"url": "http://h/mcp", "transport": "streamable-http"}, StreamableHttpServerParameters),
        ({"url": "http://h/mcp"}, StreamableHttpServerParameters),
    ],
)
def test_remote_servers_pick_their_transport(entry: dict[str, Any], kind: type) -> None:
    config = parse_config({"mcpServers": {"remote": entry}})
    assert isinstance(config.servers[0].params, kind)


def test_vscode_servers_key_loads_too() -> None:
    config = parse_config({"servers": {"a": {"type": "stdio", "command": "x"}}})
    assert config.servers[0].name == "a"


def test_variables_expand_in_env_headers_and_api_key() -> None:
    environ = {"TOKEN": "s3cret", "HOME_DIR": "/home/u"}
    config = parse_config(
        {
            "mcpServers": {
                "local": {"command": "x", "env": {"HOME": "${HOME_DIR}", "T": "${env:TOKEN}"}},
                "remote": {
                    "url": "http://h/mcp",
                    "headers": {"X-Token": "t-${TOKEN}"},
                    "apiKey": "${TOKEN}",
                },
            }
        },
        environ=environ,
    )
    local, remote = config.servers
    assert isinstance(local.params, StdioServerParameters)
    assert local.params.env == {"HOME": "/home/u", "T": "s3cret"}
    assert isinstance(remote.params, StreamableHttpServerParameters)
    assert remote.params.effective_headers == {
        "X-Token": "t-s3cret",
        "Authorization": "Bearer s3cret",
    }


def test_a_missing_variable_names_file_key_and_variable(tmp_path: Path) -> None:
    path = _write(tmp_path, {"mcpServers": {"r": {"url": "http://h", "headers": {"A": "${NOPE}"}}}})
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert "'NOPE'" in caught.value.message
    assert caught.value.details == {"file": str(path), "key": "mcpServers.r.headers.A"}


def test_sagents_keys_become_server_settings() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "s": {
                    "command": "x",
                    "connectTimeout": 5,
                    "callTimeout": 60,
                    "maxConcurrency": 2,
                    "permission": "write",
                    "toolPermissions": {"drop_table": "destructive", "ping": "read_only"},
                },
                "off": {"command": "y", "disabled": True},
                "off2": {"command": "z", "enabled": False},
            },
            "scripts": {"maxCalls": 10},
            "backgroundCalls": {"autoAfterSec": 30},
            "sandbox": {"provider": "bwrap"},
        }
    )
    (server,) = config.servers
    settings = server.settings
    assert (settings.connect_timeout, settings.call_timeout, settings.max_concurrency) == (5, 60, 2)
    assert settings.permission == "write"
    assert settings.tool_permissions == {"drop_table": "destructive", "ping": "read_only"}
    assert config.disabled == ("off", "off2")
    assert config.scripts.max_calls == 10
    assert config.scripts.max_concurrency == 4
    assert config.background_calls.auto_after_sec == 30
    assert config.sandbox.provider == "bwrap"
    assert list(config.as_supervisor_input()) == ["s"]


@pytest.mark.parametrize(
    ("data", "key", "message"),
    [
        (
            {"mcpServers": {"s": {"command": "x", "maxConcurency": 2}}},
            "mcpServers.s.maxConcurency",
            "unknown key 'maxConcurency'; did you mean 'maxConcurrency'",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "permission": "admin"}}},
            "mcpServers.s.permission",
            "Input",
        ),
        (
            {"mcpServers": {"s": {"command": "x", "callTimeout": -1}}},
            "mcpServers.s.callTimeout",
            "greater",
        ),
        ({"mcpServers": {"s": {"args": ["a"]}}}, "mcpServers.s", "needs 'command'"),
        ({"mcpServers": {"s": {"command": "x", "url": "http://h"}}}, "mcpServers.s", "not both"),
        (
            {"mcpServers": {"s": {"url": "http://h", "type": "stdio"}}},
            "mcpServers.s",
            "needs 'command'",
        ),
        ({"mcpServers": {"a__b": {"command": "x"}}}, "mcpServers.a__b", "invalid MCP server name"),
        (
            {"mcpServers": {"s": {"command": "x", "args": "not-a-list"}}},
            "mcpServers.s.args",
            "list",
        ),
        ({"mcpServers": ["s"]}, "mcpServers", "dictionary"),
    ],
)
def test_bad_entries_name_the_key(data: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_config(data, file="servers.json")
    assert caught.value.details == {"file": "servers.json", "key": key}


def test_invalid_json_names_the_file_and_position(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"mcpServers": {')
    with pytest.raises(ConfigError, match="line 1") as caught:
        load_config(path)
    assert caught.value.details["file"] == str(path)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.json")


def test_a_document_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ConfigError, match="JSON object"):
        parse_config([1, 2])


@pytest.mark.parametrize("key", ["sessionIdleTimeout", "approvals.timeoutSec"])
@pytest.mark.parametrize("value", [0, -5, "soon", 1e999, True])
def test_a_bad_timeout_is_a_clear_error_naming_its_key(
    tmp_path: Path, key: str, value: object
) -> None:
    section, _, name = key.rpartition(".")
    document: dict[str, Any] = {"mcpServers": {}}
    document.update({name: value} if not section else {section: {name: value}})
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert raised.value.details["key"] == key
    assert str(path) in str(raised.value)


def test_the_approvals_timeout_is_read_in_seconds_and_hours_are_allowed(tmp_path: Path) -> None:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": {}, "approvals": {"timeoutSec": 4 * 3600}}))
    assert load_config(path).approval_timeout_s == 4 * 3600
    path.write_text(json.dumps({"mcpServers": {}}))
    assert load_config(path).approval_timeout_s == 600  # as before the setting existed

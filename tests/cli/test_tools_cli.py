"""``sagents tools`` and ``sagents call`` against the fault server and mcp-server-time."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sagents.cli.main import app
from tests.mcp.helpers import PEER_BIN, SERVERS

runner = CliRunner()

FAULT = {"command": sys.executable, "args": [str(SERVERS / "fault_server.py")]}
TIME = {"command": str(PEER_BIN / "mcp-server-time")}


@pytest.fixture(autouse=True)
def _logs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SAGENTS_CONFIG", raising=False)


def _write(tmp_path: Path, servers: dict[str, Any], name: str = "sagents.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@pytest.fixture
def full_config(tmp_path: Path) -> Path:
    fault = {**FAULT, "args": [*FAULT["args"], "bad_schemas"]}
    broken = {"command": str(tmp_path / "no-such-server")}
    return _write(tmp_path, {"fault": fault, "time": TIME, "broken": broken})


@pytest.fixture
def fault_config(tmp_path: Path) -> Path:
    return _write(tmp_path, {"fault": FAULT, "broken": {"command": str(tmp_path / "nope")}})


def test_tools_json_lists_servers_permissions_statuses_withheld_and_failures(
    full_config: Path,
) -> None:
    result = runner.invoke(app, ["tools", "--config", str(full_config), "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    tools = {t["name"]: t for t in listing["tools"]}
    assert tools["fault__add"]["server"] == "fault"
    assert tools["fault__add"]["permission"] == "read_only"
    assert tools["fault__echo"]["permission"] == "destructive"
    assert tools["fault__add"]["status"] == "ready"
    assert tools["time__get_current_time"]["permission"] == "read_only"
    assert tools["time__get_current_time"]["exported_name"] == "time__get_current_time"
    servers = {s["name"]: s for s in listing["servers"]}
    assert servers["broken"]["state"] == "failed"
    assert servers["broken"]["last_error"]
    withheld = {w["name"]: w["reason"] for w in servers["fault"]["withheld"]}
    assert "$ref" in withheld["bad_ref"]
    assert not [name for name in tools if name.startswith("broken__")]


def test_tools_prints_plain_lines_when_piped(fault_config: Path) -> None:
    result = runner.invoke(app, ["tools", "--config", str(fault_config)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "fault__add\tfault\tread_only\tready" in lines
    assert any(line.startswith("# broken: failed: ") for line in lines)
    assert "\x1b[" not in result.stdout


def test_call_prints_the_tool_message_of_a_real_server(tmp_path: Path) -> None:
    config = _write(tmp_path, {"time": TIME})
    result = runner.invoke(
        app,
        ["call", "time__get_current_time", "--args", '{"timezone": "UTC"}', "-c", str(config)],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["timezone"] == "UTC"


def test_call_json_prints_the_tool_result(fault_config: Path) -> None:
    result = runner.invoke(
        app, ["call", "fault__add", "--args", '{"a": 2, "b": 3}', "-c", str(fault_config), "--json"]
    )
    assert result.exit_code == 0, result.output
    value = json.loads(result.stdout)
    assert value["structured"] == {"sum": 5}
    assert value["is_error"] is False
    assert value["content"][0]["type"] == "text"


def test_an_error_result_exits_1_and_is_printed(fault_config: Path) -> None:
    result = runner.invoke(
        app, ["call", "fault__add", "--args", '{"a": "two"}', "-c", str(fault_config), "--json"]
    )
    assert result.exit_code == 1
    value = json.loads(result.stdout)
    assert value["is_error"] is True
    assert value["error"]["code"] == "invalid_arguments"


def test_an_unknown_tool_is_a_clear_error_naming_the_known_tools(fault_config: Path) -> None:
    result = runner.invoke(app, ["call", "fault__nope", "-c", str(fault_config)])
    assert result.exit_code == 2
    assert "unknown tool 'fault__nope'" in result.stderr
    assert "fault__add" in result.stderr


def test_a_tool_of_a_failed_server_names_the_server_and_its_error(fault_config: Path) -> None:
    result = runner.invoke(app, ["call", "broken__thing", "-c", str(fault_config)])
    assert result.exit_code == 2
    assert "server 'broken' is failed" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("{not json", "--args is not valid JSON (line 1, column 2"),
        ("[1, 2]", "--args must be a JSON object, not list"),
    ],
)
def test_bad_args_are_refused_before_any_server_starts(
    tmp_path: Path, args: str, message: str
) -> None:
    missing = tmp_path / "missing.json"  # never read: the arguments are checked first
    result = runner.invoke(app, ["call", "x__y", "--args", args, "-c", str(missing)])
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_bad_config_names_the_file_and_the_key(tmp_path: Path) -> None:
    config = _write(tmp_path, {"bad": {"args": ["x"]}})
    result = runner.invoke(app, ["tools", "--config", str(config)])
    assert result.exit_code == 2
    assert str(config) in result.stderr
    assert "mcpServers.bad" in result.stderr


def test_invalid_json_config_names_line_and_column(tmp_path: Path) -> None:
    config = tmp_path / "broken.json"
    config.write_text('{"mcpServers": {,}}')
    result = runner.invoke(app, ["call", "a__b", "--config", str(config)])
    assert result.exit_code == 2
    assert "invalid JSON at line 1, column 17" in result.stderr


def test_the_config_comes_from_the_environment_then_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = runner.invoke(app, ["tools"])
    assert missing.exit_code == 2
    assert "sagents.json" in missing.stderr
    assert "SAGENTS_CONFIG" in missing.stderr
    _write(tmp_path, {}, name="sagents.json")
    empty = runner.invoke(app, ["tools", "--json"])
    assert empty.exit_code == 0, empty.output
    assert json.loads(empty.stdout) == {"tools": [], "servers": []}
    monkeypatch.setenv("SAGENTS_CONFIG", str(tmp_path / "other.json"))
    other = runner.invoke(app, ["tools"])
    assert other.exit_code == 2
    assert "other.json" in other.stderr


def test_the_installed_command_exits_1_for_an_error_result(fault_config: Path) -> None:
    sagents = Path(sys.executable).parent / "sagents"
    done = subprocess.run(
        [
            str(sagents),
            "call",
            "fault__error_empty",
            "--config",
            str(fault_config),
            "--mode",
            "auto",
            "--yes",  # the fault server's tools are not annotated: destructive, asked in auto mode
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("Error (reported by the tool)")


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["call", "x__y", "--args", "{not json", "--json"], "usage_error"),
        (["call", "x__y", "--args", "[1]", "--json"], "usage_error"),
        (["call", "x__y", "--json"], "config_error"),
        (["tools", "--json"], "config_error"),
    ],
)
def test_json_mode_prints_one_json_error_object_for_usage_and_config_errors(
    tmp_path: Path, argv: list[str], code: str
) -> None:
    result = runner.invoke(app, [*argv, "--config", str(tmp_path / "missing.json")])
    assert result.exit_code == 2
    value = json.loads(result.stdout)
    assert value["is_error"] is True
    assert value["error"]["code"] == code
    assert value["error"]["message"] in result.stderr


def test_json_mode_prints_a_json_error_for_an_unknown_tool(fault_config: Path) -> None:
    result = runner.invoke(app, ["call", "fault__nope", "-c", str(fault_config), "--json"])
    assert result.exit_code == 2
    value = json.loads(result.stdout)
    assert value["error"]["code"] == "unknown_tool"
    assert "fault__add" in value["error"]["message"]

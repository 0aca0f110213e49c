"""What a new user meets first with ``sagents tools``, ``call`` and ``chat``: a misspelt
top-level key, tool schemas, one log line per failed server, one way to find the config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sagents.cli.main import app
from tests.cli.cli_helpers import run_on_terminal
from tests.mcp.helpers import SERVERS

runner = CliRunner()


@pytest.fixture(autouse=True)
def _logs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SAGENTS_CONFIG", raising=False)


def test_a_misspelt_top_level_key_is_an_error_not_an_empty_listing(tmp_path: Path) -> None:
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps({"mcpServer": {"time": {"command": "mcp-server-time"}}}))
    result = runner.invoke(app, ["tools", "--config", str(config)])
    assert result.exit_code == 2
    assert "did you mean 'mcpServers'?" in result.stderr
    assert str(config) in result.stderr
    assert result.stdout == ""


FAULT = {"command": sys.executable, "args": [str(SERVERS / "fault_server.py")]}


def _config(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_tools_json_includes_each_tools_input_schema(tmp_path: Path) -> None:
    config = _config(tmp_path, {"fault": FAULT})
    result = runner.invoke(app, ["tools", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    tools = {tool["name"]: tool for tool in json.loads(result.stdout)["tools"]}
    schema = tools["fault__add"]["input_schema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"a", "b"}


def test_tools_schema_prints_one_tools_input_schema(tmp_path: Path) -> None:
    config = _config(tmp_path, {"fault": FAULT})
    result = runner.invoke(app, ["tools", "--config", str(config), "--schema", "fault__add"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert set(schema["properties"]) == {"a", "b"}
    assert schema["properties"]["a"]["type"] == "integer"


def test_tools_schema_of_an_unknown_tool_names_the_known_ones(tmp_path: Path) -> None:
    config = _config(tmp_path, {"fault": FAULT})
    result = runner.invoke(app, ["tools", "--config", str(config), "--schema", "fault__nope"])
    assert result.exit_code == 2
    assert "unknown tool 'fault__nope'" in result.stderr
    assert "fault__add" in result.stderr


def test_tools_reports_a_failed_server_once(tmp_path: Path) -> None:
    """The listing names the failed server; the log does not say it again."""
    config = _config(tmp_path, {"broken": {"command": str(tmp_path / "no-such-server")}})
    completed = subprocess.run(
        [sys.executable, "-c", "from sagents.cli.main import main; main()",
         "tools", "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    both = completed.stdout + completed.stderr
    assert both.count("no-such-server") == 1, both
    assert completed.stdout.startswith("# broken: failed: ")


def test_chat_finds_the_config_as_tools_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$SAGENTS_CONFIG`` naming a missing file is an error for both, naming the file."""
    missing = tmp_path / "other.json"
    monkeypatch.setenv("SAGENTS_CONFIG", str(missing))
    model = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--prompt", "hi"]
    for command in (["tools"], ["call", "x__y"], ["chat", *model]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, (command, result.output)
        assert str(missing) in result.stderr, (command, result.stderr)


def test_serve_over_stdio_on_a_terminal_says_on_stderr_that_it_waits_for_a_client(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "SAGENTS_DATA_DIR": str(tmp_path / "data")}  # fmt: skip
    code, stdout, shown = run_on_terminal(
        [sys.executable, "-c", "from sagents.cli.main import main; main()", "serve"],
        cwd=tmp_path,
        env=env,
        prompt=b"waiting for an MCP client",
        answer=b"\x04",  # Ctrl-D: end of input, the gateway stops
    )
    assert code == 0, shown
    assert stdout == ""  # stdout is the protocol's: nothing else goes there
    (line,) = [line for line in shown.splitlines() if "waiting for an MCP client" in line]
    assert line.startswith("sagents serve: ")

"""What a new user meets first with ``sagents tools``, ``call`` and ``chat``: a misspelt
top-level key, tool schemas, one log line per failed server, one way to find the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagents.cli.main import app

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

"""A server that exits at once is reported with its exit code, its stderr and its log path."""

import os
from pathlib import Path

import anyio
import pytest

from sagents.errors import UpstreamUnavailableError
from sagents.mcp import MCPSupervisor, ServerSettings, default_log_dir
from tests.mcp.helpers import fault_server

pytestmark = pytest.mark.anyio


async def test_a_server_that_exits_at_once_reports_its_code_stderr_and_log(
    tmp_path: Path,
) -> None:
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        with anyio.fail_after(30), pytest.raises(UpstreamUnavailableError) as raised:
            await sup.add_server("quits", fault_server("exit_at_once"))
    message = raised.value.message
    assert "exited with code 3" in message
    assert "fatal: BRAVE_API_KEY is not set" in message
    assert str(tmp_path / "quits.log") in message


async def test_the_status_of_a_failed_server_carries_its_exit_code_and_log(
    tmp_path: Path,
) -> None:
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        with anyio.fail_after(30):
            statuses = await sup.add_servers(
                {
                    "quits": (
                        fault_server("exit_at_once"),
                        ServerSettings(restart_backoff=30.0, max_restart_backoff=30.0),
                    )
                }
            )
    status = statuses["quits"]
    assert status.state == "failed"
    assert status.exit_code == 3
    assert status.log_path == str(tmp_path / "quits.log")
    assert status.last_error is not None
    assert "BRAVE_API_KEY" in status.last_error


def test_upstream_logs_follow_sagents_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", "/srv/sagents-data")
    assert default_log_dir() == Path("/srv/sagents-data/logs/mcp")
    monkeypatch.delenv("SAGENTS_DATA_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", "/srv/state")
    assert default_log_dir() == Path("/srv/state/sagents/mcp")


def test_the_suite_never_writes_logs_into_the_users_state_dir() -> None:
    home = Path.home().resolve()
    assert not default_log_dir().resolve().is_relative_to(home / ".local")
    assert os.environ["SAGENTS_DATA_DIR"] != str(home / ".local" / "share" / "sagents")

"""A server that exits at once is reported with its exit code, its stderr and its log path."""

import os
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from sagents.errors import UpstreamUnavailableError
from sagents.mcp import MCPSupervisor, ServerSettings, default_log_dir
from sagents.mcp._stdio import StdioProcess, frame_stdio
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


class _Exited:
    """The leader of a server that already exited with status 1 (the transport's handle)."""

    pid = 0
    returncode = 1

    def kill_tree(self) -> None:
        pass


async def _nothing() -> None:
    pass


async def test_a_server_that_stopped_reading_before_its_stdout_ended_has_hung_up(
    tmp_path: Path,
) -> None:
    # A server that exits at once: the first request may find its stdin closed (EPIPE) before
    # the end of its stdout is read; the connection then ends on the broken pipe, and the server
    # must still count as having hung up by itself, so that its exit status is reported.
    stdin_read, stdin_write = os.pipe()
    os.set_blocking(stdin_write, False)
    os.close(stdin_read)  # the server is gone: nothing reads its stdin
    handle = StdioProcess(_Exited(), log_path=tmp_path / "s.log", log_offset=0)
    request = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping"))
    # its stdout is still open: a child of the server holds it
    async with await anyio.open_process(["sleep", "30"], stdin=subprocess.DEVNULL) as child:
        assert child.stdout is not None
        with anyio.fail_after(10), (tmp_path / "s.log").open("a") as log:
            async with frame_stdio(
                stdin_write, child.stdout, encoding="utf-8", log=log, handle=handle, stop=_nothing
            ) as (read, write):
                with pytest.raises((anyio.BrokenResourceError, anyio.ClosedResourceError)):
                    await write.send(request)
                async for _ in read:  # ends: the broken pipe closed the reading side
                    pass
        child.kill()
    assert handle.hung_up

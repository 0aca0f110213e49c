"""Liveness: a frozen server (SIGSTOP) fails its ping after a timed-out call and is restarted."""

import contextlib
import os
import signal
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from sagents.config import parse_config
from sagents.mcp import MCPSupervisor, ServerSettings
from sagents.tool import ToolManager
from tests.mcp.helpers import fault_server
from tests.mcp.servers.fault_server import build_server

pytestmark = pytest.mark.anyio


def _resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # normally killed by the restart already
        os.kill(pid, signal.SIGCONT)


WATCHED = ServerSettings(ping_timeout=0.5, ping_interval=None, restart_backoff=0.05)


async def test_a_frozen_server_is_restarted_after_a_call_times_out(tmp_path: Path) -> None:
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("f", fault_server(), WATCHED)
        frozen = int((await sup.call_tool("f", "pid")).text)
        os.kill(frozen, signal.SIGSTOP)
        try:
            with anyio.fail_after(30):
                stuck = await sup.call_tool("f", "echo", {"text": "x"}, timeout=0.5)
                assert stuck.error is not None
                assert stuck.error.code == "timeout"
                # The next call waits for the ping's verdict, then runs on a new process.
                fresh = int((await sup.call_tool("f", "pid")).text)
        finally:
            _resume(frozen)
        status = sup.status("f")
    assert fresh != frozen
    assert status.liveness_restarts == 1
    assert status.restarts == 1
    assert status.last_restart_reason is not None
    assert "ping" in status.last_restart_reason


async def test_the_registry_reports_a_liveness_restart_in_mcp_server_status(
    tmp_path: Path,
) -> None:
    settings = ServerSettings(
        ping_timeout=0.5, ping_interval=None, restart_backoff=0.05, log_dir=tmp_path
    )
    async with ToolManager() as tm:
        await tm.register_mcp_server("f", fault_server(), settings)
        frozen = int((await tm.run_tool("f__pid", {})).text)
        os.kill(frozen, signal.SIGSTOP)
        try:
            with anyio.fail_after(30):
                await tm.run_tool("f__echo", {"text": "x"}, timeout=0.5)
                again = await tm.run_tool("f__echo", {"text": "back"})
        finally:
            _resume(frozen)
        status = tm.mcp_server_status("f")
    assert again.text == "back"
    assert status.liveness_restarts == 1


async def test_a_live_server_that_was_slow_keeps_its_connection(tmp_path: Path) -> None:
    # A live server answers its ping at once; the generous bound keeps a loaded machine's
    # stall from being taken for a frozen server (as it could be within 0.5 s).
    patient = replace(WATCHED, ping_timeout=30.0)
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("f", build_server(set()), patient)
        with anyio.fail_after(30):
            slow = await sup.call_tool("f", "hang", timeout=0.2)
            after = await sup.call_tool("f", "echo", {"text": "still here"})
        status = sup.status("f")
    assert slow.error is not None
    assert slow.error.code == "timeout"
    assert after.text == "still here"
    assert (status.restarts, status.liveness_restarts) == (0, 0)


async def test_an_idle_server_is_pinged_periodically_and_restarted_when_frozen(
    tmp_path: Path,
) -> None:
    settings = ServerSettings(ping_timeout=0.3, ping_interval=0.2, restart_backoff=0.05)
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("f", fault_server(), settings)
        frozen = sup.status("f").pid
        assert frozen is not None
        # pidfd: the kernel tells when the frozen process is gone, no sleeping.
        pidfd = os.pidfd_open(frozen)
        try:
            os.kill(frozen, signal.SIGSTOP)
            with anyio.fail_after(30):
                await anyio.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        with anyio.fail_after(30):
            fresh = int((await sup.call_tool("f", "pid")).text)
        status = sup.status("f")
    assert fresh != frozen
    assert status.liveness_restarts == 1


def test_ping_settings_come_from_the_config_file() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "a": {"command": "x", "pingInterval": 5, "pingTimeout": 2},
                "b": {"command": "y", "pingInterval": 0},
                "c": {"command": "z"},
            }
        }
    )
    settings = {server.name: server.settings for server in config.servers}
    assert (settings["a"].ping_interval, settings["a"].ping_timeout) == (5, 2)
    assert settings["b"].ping_interval is None
    assert settings["c"].ping_interval == ServerSettings().ping_interval

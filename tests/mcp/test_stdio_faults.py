"""The fault suite over real subprocesses (stdio): deaths, garbage, stubborn processes, hygiene."""

import os
import sys
from pathlib import Path

import anyio
import pytest

from sagents.core._spec import ToolSpec
from sagents.mcp import MCPSupervisor, ServerSettings
from sagents.mcp._stdio import watchdog_pid
from tests.mcp.helpers import ROOT, child_pids, fault_server, process_state, tiny_legacy

pytestmark = pytest.mark.anyio

FAST = ServerSettings(restart_backoff=0.0, connect_timeout=60.0)


def _gone(pid: int) -> bool:
    return process_state(pid) in (None, "Z")


async def test_a_server_dying_mid_call_fails_the_call_and_restarts_on_the_next(
    tmp_path: Path,
) -> None:
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("f", fault_server("garbage"), FAST)
        first_pid = int((await sup.call_tool("f", "pid")).text)
        with anyio.fail_after(10):
            died = await sup.call_tool("f", "die")
        assert died.error is not None
        assert died.error.code == "upstream_unavailable"
        again = await sup.call_tool("f", "echo", {"text": "back"})
        assert again.text == "back"
        second_pid = int((await sup.call_tool("f", "pid")).text)
        big = await sup.call_tool("f", "big")
        status = sup.status("f")
    assert second_pid != first_pid
    assert status.restarts == 1
    assert len(big.text) == 5_000_000
    log = (tmp_path / "f.log").read_text()
    assert "not JSON-RPC" in log
    assert log.count("fault server starting") == 2


async def test_an_idempotent_call_is_retried_once_on_a_restarted_server(tmp_path: Path) -> None:
    params = fault_server(env={"DIE_ONCE_FILE": str(tmp_path / "died")})
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("f", params, FAST)
        with anyio.fail_after(30):
            result = await sup.call_tool("f", "die_once")
        restarts = sup.status("f").restarts
    assert result.text == "survived"
    assert restarts == 1


async def test_close_ends_a_server_that_ignores_sigterm_and_its_grandchild(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    params = fault_server(
        "ignore_sigterm", "grandchild", env={"GRANDCHILD_PID_FILE": str(pid_file)}
    )
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("stubborn", params, FAST)
        server_pid = sup.status("stubborn").pid
        assert server_pid is not None
        grandchild = int(pid_file.read_text())
        assert not _gone(grandchild)
        with anyio.fail_after(15):
            await sup.remove_server("stubborn")
    assert _gone(server_pid)
    assert _gone(grandchild)
    assert server_pid not in child_pids()


async def test_200_connect_close_cycles_leave_no_child_processes(tmp_path: Path) -> None:
    before = set(child_pids())
    settings = ServerSettings(discover_timeout=0.05)
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        for _ in range(200):
            await sup.add_server("tiny", tiny_legacy(), settings)
            await sup.remove_server("tiny")
    leftover = set(child_pids()) - before - {watchdog_pid()}  # the watchdog stays, by design
    assert leftover == set()


async def test_a_legacy_server_ignoring_discover_connects_and_refreshes_its_tools(
    tmp_path: Path,
) -> None:
    changed = anyio.Event()

    async def on_change(server: str, specs: tuple[ToolSpec, ...]) -> None:
        if "tiny__grown3" in {s.name for s in specs}:  # the first listing is announced too
            changed.set()

    settings = ServerSettings(discover_timeout=0.2, connect_timeout=5.0)
    async with MCPSupervisor(log_dir=tmp_path, on_tools_changed=on_change) as sup:
        specs = await sup.add_server("tiny", tiny_legacy(), settings)
        status = sup.status("tiny")
        assert status.protocol_version == "2025-06-18"
        assert [s.name for s in specs] == ["tiny__echo", "tiny__grow"]
        assert [w.name for w in status.withheld] == ["scalar"]
        await sup.call_tool("tiny", "grow")
        with anyio.fail_after(10):
            await changed.wait()
        assert "tiny__grown3" in {s.name for s in sup.tools("tiny")}


async def test_a_slow_server_does_not_block_the_others(tmp_path: Path) -> None:
    fast_ready = anyio.Event()
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        async with anyio.create_task_group() as tg:

            async def add_fast() -> None:
                await sup.add_server("fast", tiny_legacy(), ServerSettings(discover_timeout=0.2))
                assert sup.status("slow").state == "connecting"
                fast_ready.set()

            tg.start_soon(sup.add_server, "slow", fault_server("slow_start"), FAST)
            tg.start_soon(add_fast)
        assert fast_ready.is_set()
        assert sup.status("slow").state == "ready"


async def test_without_async_with_aclose_ends_the_servers(tmp_path: Path) -> None:
    sup = MCPSupervisor(log_dir=tmp_path)
    await sup.add_server("tiny", tiny_legacy(), ServerSettings(discover_timeout=0.05))
    pid = sup.status("tiny").pid
    assert pid is not None
    await sup.aclose()
    assert _gone(pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


UNCLOSED = """
import sys, anyio
from sagents.mcp import MCPSupervisor, ServerSettings
from tests.mcp.helpers import tiny_legacy

async def main() -> None:
    sup = MCPSupervisor(log_dir=__import__("pathlib").Path(sys.argv[1]))
    await sup.add_server("tiny", tiny_legacy(), ServerSettings(discover_timeout=0.05))
    print(sup.status("tiny").pid, flush=True)

anyio.run(main)
"""


async def test_no_stdio_server_outlives_a_process_that_never_closed_it(tmp_path: Path) -> None:
    done = await anyio.run_process(
        [sys.executable, "-c", UNCLOSED, str(tmp_path)], cwd=ROOT, check=True
    )
    pid = int(done.stdout.decode().split()[-1])
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)

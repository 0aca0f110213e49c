"""Upstreams die with the process that started them: SIGTERM/SIGINT close them in order,
SIGKILL still ends them and their grandchildren (through the watchdog)."""

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.mcp.helpers import ROOT, SERVERS

pytestmark = pytest.mark.anyio

FAULT = SERVERS / "fault_server.py"
CLI = "from sagents.cli.main import main; main()"

HOLDER = """
import sys
import anyio
from pathlib import Path
from mcp import StdioServerParameters
from sagents.mcp import MCPSupervisor

async def main() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=[sys.argv[1], "grandchild"],
        env={"GRANDCHILD_PID_FILE": sys.argv[2]},
    )
    async with MCPSupervisor(log_dir=Path(sys.argv[3])) as sup:
        await sup.add_server("f", params)
        print(sup.status("f").pid, flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


async def wait_gone(*pids: int) -> None:
    """Wait until every pid has exited: the kernel makes its pidfd readable."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            await anyio.wait_readable(fd)
        finally:
            os.close(fd)


async def read_line(stream: BufferedByteReceiveStream) -> bytes:
    return await stream.receive_until(b"\n", 1 << 20)


async def test_a_sigkilled_process_takes_its_stdio_servers_and_grandchildren_along(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    command = [sys.executable, "-c", HOLDER, str(FAULT), str(pid_file), str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as holder:
            assert holder.stdout is not None
            server = int(await read_line(BufferedByteReceiveStream(holder.stdout)))
            grandchild = int(pid_file.read_text())
            holder.kill()  # SIGKILL: no atexit hook, no finally
            await holder.wait()
            await wait_gone(server, grandchild)
    assert holder.returncode == -signal.SIGKILL


EXITING = """
import os
from sagents.mcp._stdio import _LIVE_GROUPS, watchdog_pid, _WATCHDOG

child = os.posix_spawnp("sleep", ["sleep", "600"], os.environ, setsid=True)
_LIVE_GROUPS.add(child)  # as a stdio server still running when the process exits
_WATCHDOG.watch(child)
print(child, watchdog_pid(), flush=True)
"""


async def test_a_process_that_exits_normally_reaps_its_watchdog_and_its_servers() -> None:
    """At a normal exit the servers still running are killed and the watchdog is hung up on
    and reaped: nothing is left running and Python reports no subprocess still running."""
    command = [sys.executable, "-W", "default", "-c", EXITING]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with anyio.fail_after(60):
        done = await anyio.run_process(command, env=env, cwd=ROOT, check=False)
        server, watchdog = (int(pid) for pid in done.stdout.split())
        await wait_gone(server, watchdog)
    assert done.returncode == 0, done.stderr.decode()
    assert b"ResourceWarning" not in done.stderr, done.stderr.decode()


def _request(method: str, ident: int | None, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if ident is not None:
        message["id"] = ident
    return (json.dumps(message) + "\n").encode()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_sagents_serve_closes_its_upstreams_in_order_on_a_signal(
    tmp_path: Path, signum: signal.Signals
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    upstream = {
        "command": sys.executable,
        "args": [str(FAULT), "grandchild"],
        "env": {"GRANDCHILD_PID_FILE": str(pid_file), "PYTHONPATH": str(ROOT)},
    }
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps({"mcpServers": {"f": upstream}}), encoding="utf-8")
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(data)}
    command = [sys.executable, "-c", CLI, "serve", "--config", str(config)]
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    }
    with anyio.fail_after(90):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as serve:
            assert serve.stdin is not None
            assert serve.stdout is not None
            out = BufferedByteReceiveStream(serve.stdout)
            await serve.stdin.send(_request("initialize", 1, init))
            assert json.loads(await read_line(out))["id"] == 1
            await serve.stdin.send(_request("notifications/initialized", None))
            await serve.stdin.send(_request("tools/list", 2))
            listed = json.loads(await read_line(out))
            if not listed["result"]["tools"]:
                # A loaded machine can take longer than the first list's wait to start the
                # upstream: its tools are then announced, and listed again.
                while json.loads(await read_line(out)).get("method") != (
                    "notifications/tools/list_changed"
                ):
                    pass
                await serve.stdin.send(_request("tools/list", 3))
                listed = json.loads(await read_line(out))
            grandchild = int(pid_file.read_text())
            serve.send_signal(signum)
            code = await serve.wait()
            await wait_gone(grandchild)
    assert "f__echo" in {tool["name"] for tool in listed["result"]["tools"]}
    assert code == 0
    log = (data / "logs" / "mcp" / "f.log").read_text()
    assert "fault server stopped: its stdin closed" in log  # closed in order, not killed


async def test_sagents_serve_answers_initialize_while_four_upstreams_are_still_starting(
    tmp_path: Path,
) -> None:
    servers: dict[str, Any] = {}
    for index in range(4):
        gate = tmp_path / f"gate{index}"
        os.mkfifo(gate)  # never opened for writing: these servers never get past their start
        script = f'read line < "{gate}"; exec "{sys.executable}" "{FAULT}"'
        servers[f"s{index}"] = {"command": "sh", "args": ["-c", script], "connectTimeout": 600}
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "data")}
    command = [sys.executable, "-c", CLI, "serve", "--config", str(config)]
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    }
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as serve:
            assert serve.stdin is not None
            assert serve.stdout is not None
            await serve.stdin.send(_request("initialize", 1, init))
            answer = json.loads(await read_line(BufferedByteReceiveStream(serve.stdout)))
            serve.send_signal(signal.SIGTERM)
            code = await serve.wait()
    assert answer["result"]["serverInfo"]["name"] == "sagents"
    assert code == 0

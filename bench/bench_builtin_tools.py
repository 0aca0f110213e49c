"""Cost of the built-in tools against the sandbox calls they wrap, measured in the same run.

Run: ``.venv/bin/python bench/bench_builtin_tools.py``. Prints, for each case, the baseline, the
tool's time and their ratio:

* ``execute_shell_command`` following 20 MB of output (byte-offset reads, progress emitted to a
  live consumer) against ``sandbox.run`` of the same command with a 4 KiB output cap;
* a 2,000-line ``file_read`` through ``ToolManager.run_tool`` against ``sandbox.read_file``
  plus a decode (memory sandbox).
"""

from __future__ import annotations

import tempfile
import time

import anyio

from sagents.progress import ProgressHub
from sagents.sandbox import Sandbox, create_sandbox
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import register_builtin_tools, single_sandbox

COMMAND = "head -c 20000000 /dev/zero | tr '\\0' 'a'"


async def _drain(hub: ProgressHub, done: anyio.Event) -> None:
    async with hub.subscribe("bench") as queue:
        while not done.is_set():
            with anyio.move_on_after(0.5):
                await queue.receive()


async def bench_shell(sandbox: Sandbox, rounds: int) -> tuple[float, float]:
    hub = ProgressHub()
    manager = ToolManager(progress_hub=hub)
    register_builtin_tools(manager, single_sandbox(sandbox))
    context = SessionContext(session_id="bench")
    start = time.perf_counter()
    for _ in range(rounds):
        await sandbox.run(["sh", "-c", COMMAND], max_output_bytes=4096)
    base = (time.perf_counter() - start) / rounds
    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_drain, hub, done)
        start = time.perf_counter()
        for _ in range(rounds):
            result = await manager.run_tool(
                "execute_shell_command", {"command": COMMAND, "wait_seconds": 120}, context
            )
            assert result.structured["output_bytes"] == 20_000_000, result.text
        tool = (time.perf_counter() - start) / rounds
        done.set()
    return base, tool


async def bench_file_read(rounds: int) -> tuple[float, float]:
    async with create_sandbox("memory", workspace="/bench") as sandbox:
        text = "".join(f"line {i}: some text of a source file\n" for i in range(2000))
        await sandbox.write_file("f.txt", text.encode())
        manager = ToolManager()
        register_builtin_tools(manager, single_sandbox(sandbox))
        context = SessionContext(session_id="bench")
        start = time.perf_counter()
        for _ in range(rounds):
            (await sandbox.read_file("f.txt")).decode().splitlines()
        base = (time.perf_counter() - start) / rounds
        start = time.perf_counter()
        for _ in range(rounds):
            await manager.run_tool("file_read", {"path": "f.txt"}, context)
        tool = (time.perf_counter() - start) / rounds
    return base, tool


async def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        async with create_sandbox("local", workspace=workspace) as sandbox:
            base, tool = await bench_shell(sandbox, rounds=5)
    print(
        f"shell, 20 MB output: sandbox.run {base * 1000:.0f} ms, execute_shell_command "
        f"{tool * 1000:.0f} ms, ratio {tool / base:.2f}x"
    )
    base, tool = await bench_file_read(rounds=200)
    print(
        f"file_read, 2000 lines: read_file+decode {base * 1e6:.0f} us, file_read tool "
        f"{tool * 1e6:.0f} us, ratio {tool / base:.1f}x"
    )


if __name__ == "__main__":
    anyio.run(main)

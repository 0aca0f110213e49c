"""Benchmark: ToolManager.run_tool and MCPSupervisor.call_tool against the SDK's own client.

Prints calls/s and p50/p99 latency (ms) of ``echo`` over stdio (tests/mcp/servers/fault_server.py)
and over Streamable HTTP (npm server-everything, installed by scripts/setup-peers.sh), at
concurrency 1 and 8, for three paths to the same server in the same run: the bare SDK client
(the baseline), ``MCPSupervisor.call_tool`` and ``ToolManager.run_tool`` (argument validation,
timeout, progress binding and the result boundary on top), with each path's ratio to the SDK
(1.0 = as fast as the bare SDK client).

Run: .venv/bin/python bench/bench_mcp.py [calls per case, default 400]
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from anyio.streams.text import TextReceiveStream
from mcp import Client, StdioServerParameters

from sagents.mcp import MCPSupervisor, ServerSettings, StreamableHttpServerParameters
from sagents.tool import ToolManager

ROOT = Path(__file__).resolve().parents[1]
FAULT = ROOT / "tests" / "mcp" / "servers" / "fault_server.py"
EVERYTHING = ROOT / ".peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

Call = Callable[[], Awaitable[object]]


async def measure(call: Call, total: int, concurrency: int) -> tuple[float, float, float]:
    """Run ``total`` calls, ``concurrency`` at once; return (calls/s, p50 ms, p99 ms)."""
    latencies: list[float] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    for _ in range(20):  # warm-up
        await call()
    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    elapsed = time.perf_counter() - began
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return total / elapsed, statistics.median(latencies) * 1000, p99 * 1000


Figures = tuple[float, float, float]


def report(transport: str, concurrency: int, sdk: Figures, **paths: Figures) -> None:
    """Print one line per path: calls/s, p50 and p99 ms, and the ratio of calls/s to the SDK's."""
    rows = {"sdk": sdk, **paths}
    for name, (rate, p50, p99) in rows.items():
        print(
            f"{transport:<6} c={concurrency}  {name:<11} {rate:7.0f} calls/s"
            f"  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  ratio {rate / sdk[0]:.2f}"
        )


async def bench_case(transport: str, sdk_target: object, params: object, total: int) -> None:
    args = {"text": "x"} if transport == "stdio" else {"message": "x"}
    with tempfile.TemporaryDirectory() as logs:
        settings = ServerSettings(connect_timeout=60.0, max_concurrency=8, log_dir=Path(logs))
        async with (
            MCPSupervisor(log_dir=Path(logs)) as sup,
            ToolManager() as manager,
            Client(sdk_target) as client,  # type: ignore[arg-type]
        ):
            await sup.add_server("bench", params, settings)  # type: ignore[arg-type]
            await manager.register_mcp_server("bench", params, settings)  # type: ignore[arg-type]

            async def supervisor() -> object:
                result = await sup.call_tool("bench", "echo", args)
                assert not result.is_error, result
                return result

            async def run_tool() -> object:
                result = await manager.run_tool("bench__echo", args)
                assert not result.is_error, result
                return result

            async def sdk() -> object:
                return await client.call_tool("echo", args)

            for concurrency in (1, 8):
                report(
                    transport,
                    concurrency,
                    await measure(sdk, total, concurrency),
                    supervisor=await measure(supervisor, total, concurrency),
                    run_tool=await measure(run_tool, total, concurrency),
                )


async def main(total: int) -> None:
    stdio = StdioServerParameters(command=sys.executable, args=[str(FAULT)])
    await bench_case("stdio", stdio, stdio, total)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = await anyio.open_process(
        ["node", str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stderr=-1,
        stdout=-1,
    )
    try:
        assert process.stderr is not None
        seen = ""
        with anyio.fail_after(60):
            async for chunk in TextReceiveStream(process.stderr):
                seen += chunk
                if str(port) in seen:
                    break
        url = f"http://127.0.0.1:{port}/mcp"
        await bench_case("http", url, StreamableHttpServerParameters(url=url), total)
    finally:
        process.terminate()
        await process.wait()


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 400)

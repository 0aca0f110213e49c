"""Benchmark: MCPSupervisor.call_tool against the SDK's own client, same server, same run.

Prints calls/s and p50/p99 latency (ms) of ``echo`` over stdio (tests/mcp/servers/fault_server.py)
and over Streamable HTTP (npm server-everything, installed by scripts/setup-peers.sh), at
concurrency 1 and 8, and the ratio sagents/SDK (1.0 = as fast as the bare SDK client).

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


def report(
    transport: str,
    concurrency: int,
    ours: tuple[float, float, float],
    sdk: tuple[float, float, float],
) -> None:
    print(
        f"{transport:<6} c={concurrency}  "
        f"sagents {ours[0]:7.0f}/s p50 {ours[1]:6.2f} ms p99 {ours[2]:6.2f} ms"
        f" | sdk {sdk[0]:7.0f}/s p50 {sdk[1]:6.2f} ms p99 {sdk[2]:6.2f} ms"
        f" | ratio {ours[0] / sdk[0]:.2f}"
    )


async def bench_case(transport: str, sdk_target: object, params: object, total: int) -> None:
    settings = ServerSettings(connect_timeout=60.0, max_concurrency=8)
    with tempfile.TemporaryDirectory() as logs:
        async with MCPSupervisor(log_dir=Path(logs)) as sup, Client(sdk_target) as client:  # type: ignore[arg-type]
            await sup.add_server("bench", params, settings)  # type: ignore[arg-type]

            async def ours() -> object:
                result = await sup.call_tool(
                    "bench", "echo", {"text": "x"} if transport == "stdio" else {"message": "x"}
                )
                assert not result.is_error, result
                return result

            async def sdk() -> object:
                args = {"text": "x"} if transport == "stdio" else {"message": "x"}
                return await client.call_tool("echo", args)

            for concurrency in (1, 8):
                report(
                    transport,
                    concurrency,
                    await measure(ours, total, concurrency),
                    await measure(sdk, total, concurrency),
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

"""Benchmark: ToolManager.run_tool and MCPSupervisor.call_tool against the SDK's own client.

Prints calls/s and p50/p99 latency (ms) of ``echo`` over stdio (tests/mcp/servers/fault_server.py)
and over Streamable HTTP (npm server-everything, installed by scripts/setup-peers.sh), at
concurrency 1 and 8, for three paths to the same server in the same run: the bare SDK client
(the baseline), ``MCPSupervisor.call_tool`` and ``ToolManager.run_tool`` (argument validation,
timeout, progress binding and the result boundary on top), with each path's ratio to the SDK
(1.0 = as fast as the bare SDK client).

Run: .venv/bin/python bench/bench_mcp.py [calls per path, default 900] [--stdio-only] [--json]

``--cpu`` measures host CPU per call only, over longer rounds than calls/s can be judged by on a
loaded machine: ``run_tool`` and the SDK client alternating, 5 rounds of 500 calls at
concurrency 4 over stdio, the median round of each (prints ms per call and the ratio, one JSON
line with ``--json``).

``--json`` prints, as the last line, the ratios by case (``"stdio c=1"``: ``{"supervisor": ..,
"run_tool": ..}``) for ``bench/summary.py``. The three paths of a case run in 9 alternating
rounds, the order rotated each round, so that a change of load hits them alike; a path's ratios
(calls/s, host CPU per call) are the medians of its per-round ratios to the SDK.
"""

from __future__ import annotations

import json
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


async def measure(
    call: Call, total: int, concurrency: int, *, warm_up: bool = True
) -> tuple[float, float, float, float]:
    """Run ``total`` calls, ``concurrency`` at once (after 20 unmeasured ones when ``warm_up``);
    (calls/s, p50 ms, p99 ms, host CPU ms/call).

    Host CPU is this process's CPU time (``time.process_time``): the client side of the call,
    which the load of the machine disturbs far less than wall time; the server's own process
    is not in it.
    """
    latencies: list[float] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    for _ in range(20 if warm_up else 0):
        await call()
    began, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    elapsed = time.perf_counter() - began
    cpu = time.process_time() - cpu
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return total / elapsed, statistics.median(latencies) * 1000, p99 * 1000, cpu / total * 1000


Figures = tuple[float, float, float, float]


RATIOS: dict[str, dict[str, float]] = {}
QUIET = False


Paired = dict[str, tuple[float, float]]


def report(
    transport: str, concurrency: int, sdk: Figures, paired: Paired, **paths: Figures
) -> None:
    """Print one line per path: calls/s, p50 and p99 ms and host CPU of its median round, and
    its paired ratios to the SDK (calls/s, host CPU per call; see :func:`rounds`)."""
    rows = {"sdk": sdk, **paths}
    case = RATIOS.setdefault(f"{transport} c={concurrency}", {})
    for name, (rate, p50, p99, cpu) in rows.items():
        ratio, cpu_ratio = paired.get(name, (1.0, 1.0))
        if name != "sdk":
            case[name] = ratio
            case[f"{name} CPU / sdk CPU"] = cpu_ratio
        if not QUIET:
            print(
                f"{transport:<6} c={concurrency}  {name:<11} {rate:7.0f} calls/s"
                f"  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  paired ratio {ratio:.2f}"
                f"  host CPU {cpu:5.2f} ms/call ({cpu_ratio:.2f} x sdk, paired)"
            )


ROUNDS = 9  # a multiple of the three paths: each runs first, second and last equally often


async def rounds(
    sdk: Call, others: dict[str, Call], total: int, concurrency: int
) -> tuple[dict[str, Figures], Paired]:
    """Alternate the paths over ``ROUNDS`` rounds of ``total // ROUNDS`` calls each (at least
    one), the order rotated each round; only each path's first round is preceded by a warm-up.

    Returns:
        The median round of each path (by calls/s), and each other path's paired ratios: the
        median, over the rounds, of its calls/s divided by the SDK's in the same round, and
        the same for its host CPU per call. At concurrency 1 a round lasts a second or less,
        shorter than the swings of a shared machine, and a ratio paired within a round is far
        steadier than one of two medians.
    """
    paths = {"sdk": sdk, **others}
    names = list(paths)
    seen: dict[str, list[Figures]] = {name: [] for name in paths}
    for turn in range(ROUNDS):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:
            seen[name].append(
                await measure(paths[name], max(total // ROUNDS, 1), concurrency, warm_up=turn == 0)
            )
    paired = {
        name: (
            statistics.median(
                mine[0] / base[0] for mine, base in zip(seen[name], seen["sdk"], strict=True)
            ),
            statistics.median(
                mine[3] / base[3] for mine, base in zip(seen[name], seen["sdk"], strict=True)
            ),
        )
        for name in others
    }
    return {name: sorted(figures)[ROUNDS // 2] for name, figures in seen.items()}, paired


def _echo_calls(manager: ToolManager, client: Client, args: dict[str, str]) -> tuple[Call, Call]:
    """``run_tool`` on the server's ``echo`` (its result checked), and the SDK client's call."""

    async def run_tool() -> object:
        result = await manager.run_tool("bench__echo", args)
        assert not result.is_error, result
        return result

    async def sdk() -> object:
        return await client.call_tool("echo", args)

    return run_tool, sdk


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

            run_tool, sdk = _echo_calls(manager, client, args)

            for concurrency in (1, 8):
                figures, paired = await rounds(
                    sdk, {"supervisor": supervisor, "run_tool": run_tool}, total, concurrency
                )
                report(transport, concurrency, figures.pop("sdk"), paired, **figures)


async def main(total: int, http: bool) -> None:
    stdio = StdioServerParameters(command=sys.executable, args=[str(FAULT)])
    await bench_case("stdio", stdio, stdio, total)
    if not http:
        return
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


CPU_ROUNDS = 5
CPU_CALLS = 500
CPU_CONCURRENCY = 4


async def cpu_only() -> dict[str, float]:
    """Host CPU ms per call of ``run_tool`` and of the SDK client, alternating rounds."""
    stdio = StdioServerParameters(command=sys.executable, args=[str(FAULT)])
    args = {"text": "x"}
    with tempfile.TemporaryDirectory() as logs:
        settings = ServerSettings(connect_timeout=60.0, max_concurrency=8, log_dir=Path(logs))
        async with ToolManager() as manager, Client(stdio) as client:
            await manager.register_mcp_server("bench", stdio, settings)

            run_tool, sdk = _echo_calls(manager, client, args)

            seen: dict[str, list[float]] = {"sdk": [], "run_tool": []}
            for _ in range(CPU_ROUNDS):
                for name, call in (("sdk", sdk), ("run_tool", run_tool)):
                    cpu = (await measure(call, CPU_CALLS, CPU_CONCURRENCY))[3]
                    seen[name].append(cpu)
    figures = {name: statistics.median(values) for name, values in seen.items()}
    figures["ratio"] = figures["run_tool"] / figures["sdk"]
    return figures


if __name__ == "__main__":
    flags = {arg for arg in sys.argv[1:] if arg.startswith("--")}
    counts = [int(arg) for arg in sys.argv[1:] if not arg.startswith("--")]
    QUIET = "--json" in flags
    if "--cpu" in flags:
        cpu = anyio.run(cpu_only)
        if QUIET:
            print(json.dumps(cpu))
        else:
            print(
                f"stdio c={CPU_CONCURRENCY}, {CPU_ROUNDS} x {CPU_CALLS} calls: host CPU "
                f"SDK {cpu['sdk']:.3f} ms/call, run_tool {cpu['run_tool']:.3f} ms/call, "
                f"run_tool / SDK {cpu['ratio']:.2f}"
            )
        sys.exit(0)
    anyio.run(main, counts[0] if counts else 900, "--stdio-only" not in flags)
    if QUIET:
        print(json.dumps(RATIOS))

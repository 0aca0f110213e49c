"""``sagents serve`` (stdio) in front of an echo server against the echo server directly.

Both targets are driven by the ``mcp`` SDK's own stdio client in this process: the echo server
is ``tests/mcp/servers/fault_server.py`` (its ``echo`` tool); the proxy is ``sagents serve
--mode auto`` with that server as its only upstream (``mcpServers``), so every call crosses
two stdio hops and the gateway. Paths alternate over 3 rounds at concurrency 1 and 8; the
median round of each counts; the figure is calls/s through the proxy / calls/s direct, and the
host CPU per call of this (client) process, which does not include the gateway's own process.

Run: ``.venv/bin/python bench/bench_serve_proxy.py [calls per round, default 200] [--json]``
(``--json`` prints the ratios as the last line, for ``bench/summary.py``).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
FAULT = ROOT / "tests" / "mcp" / "servers" / "fault_server.py"
ROUNDS = 3
SERVE = ["-c", "from sagents.cli.main import main; main()", "serve"]

Call = Callable[[], Awaitable[object]]


async def measure(call: Call, total: int, concurrency: int) -> tuple[float, float]:
    """(calls/s, host CPU ms per call) for ``total`` calls, ``concurrency`` at once."""
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    began, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return total / (time.perf_counter() - began), (time.process_time() - cpu) / total * 1e3


async def main(total: int, quiet: bool) -> dict[str, float]:
    direct = StdioServerParameters(command=sys.executable, args=[str(FAULT)])
    with tempfile.TemporaryDirectory() as data:
        config = Path(data) / "mcp_servers.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "echo": {
                            "command": sys.executable,
                            "args": [str(FAULT)],
                            "permission": "read_only",
                        }
                    }
                }
            )
        )
        proxy = StdioServerParameters(
            command=sys.executable,
            args=[*SERVE, "--config", str(config), "--mode", "auto"],
            env={**os.environ, "SAGENTS_DATA_DIR": data},
        )
        figures: dict[str, float] = {}
        async with Client(direct) as bare, Client(proxy) as gateway:  # type: ignore[arg-type]

            async def call_bare() -> object:
                return await bare.call_tool("echo", {"text": "x"})

            async def call_gateway() -> object:
                result = await gateway.call_tool("echo__echo", {"text": "x"})
                assert not result.is_error, result
                return result

            for _ in range(20):  # warm-up: connections, the gateway's first listing
                await call_bare()
                await call_gateway()
            for concurrency in (1, 8):
                seen: dict[str, list[tuple[float, float]]] = {"bare": [], "gateway": []}
                for _ in range(ROUNDS):
                    seen["bare"].append(await measure(call_bare, total, concurrency))
                    seen["gateway"].append(await measure(call_gateway, total, concurrency))
                bare_rate = statistics.median(rate for rate, _ in seen["bare"])
                gateway_rate = statistics.median(rate for rate, _ in seen["gateway"])
                bare_cpu = statistics.median(cpu for _, cpu in seen["bare"])
                gateway_cpu = statistics.median(cpu for _, cpu in seen["gateway"])
                figures[f"c={concurrency} ratio"] = gateway_rate / bare_rate
                figures[f"c={concurrency} client CPU ratio"] = gateway_cpu / bare_cpu
                if not quiet:
                    print(
                        f"c={concurrency}: direct {bare_rate:6.0f} calls/s, through sagents serve"
                        f" {gateway_rate:6.0f} calls/s, ratio {gateway_rate / bare_rate:.2f}"
                        f" (goal >= 0.6); client CPU {gateway_cpu:.2f} vs {bare_cpu:.2f} ms/call"
                    )
    return figures


if __name__ == "__main__":
    counts = [int(arg) for arg in sys.argv[1:] if not arg.startswith("--")]
    as_json = "--json" in sys.argv[1:]
    result = anyio.run(main, counts[0] if counts else 200, as_json)
    if as_json:
        print(json.dumps(result))

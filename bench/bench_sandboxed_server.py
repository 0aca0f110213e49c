"""Cost of running an upstream stdio server in its own sandbox (docs/mcp.md, "Sandboxed
servers"), against the same server on the host, measured in the same run.

For each of N rounds, interleaved: start the server and list its tools (``add_server``), make
M calls, close it (``remove_server``) — once on the host (the baseline), once sandboxed. The
server is the stdlib-only tests/mcp/servers/escape_server.py, so the figures are the sandbox's
own cost, not a runtime's start-up. Prints milliseconds per start and per call and the ratio to
the host. Not a test.

Usage: .venv/bin/python bench/bench_sandboxed_server.py [N] [M]
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio
from mcp import StdioServerParameters

from sagents.mcp import MCPSupervisor, ServerSandbox, ServerSettings
from sagents.sandbox.bwrap import python_runtime

SERVERS = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "servers"


async def _round(sup: MCPSupervisor, settings: ServerSettings, calls: int) -> tuple[float, float]:
    params = StdioServerParameters(
        command=python_runtime()[1], args=[str(SERVERS / "escape_server.py")]
    )
    start = time.perf_counter()
    await sup.add_server("bench", params, settings)
    started = time.perf_counter()
    for _ in range(calls):
        result = await sup.call_tool("bench", "whoami")
        if result.is_error:
            raise SystemExit(f"the call failed: {result!r}")
    called = time.perf_counter()
    await sup.remove_server("bench")
    return started - start, (called - started) / calls


async def main(rounds: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        # The test server ignores server/discover: a short probe keeps its wait out of the figures.
        host = ServerSettings(discover_timeout=0.05)
        box = ServerSandbox(readable=(str(SERVERS),), home=f"{root}/home")
        kinds = {"host": host, "sandbox": replace(host, sandbox=box)}
        times: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
        async with MCPSupervisor(log_dir=Path(root) / "logs") as sup:
            for settings in kinds.values():
                await _round(sup, settings, 2)  # warm up
            for _ in range(rounds):
                for kind, settings in kinds.items():
                    times[kind].append(await _round(sup, settings, calls))
    print(f"stdio server started and listed {rounds}x each, {calls} calls per start")
    print(f"{'where':<10}{'start ms':>10}{'ratio':>8}{'call ms':>10}{'ratio':>8}")
    base_start = sum(t[0] for t in times["host"]) / rounds
    base_call = sum(t[1] for t in times["host"]) / rounds
    for kind, found in times.items():
        start = sum(t[0] for t in found) / rounds
        call = sum(t[1] for t in found) / rounds
        print(
            f"{kind:<10}{start * 1000:>10.1f}{start / base_start:>8.2f}"
            f"{call * 1000:>10.2f}{call / base_call:>8.2f}"
        )


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:3]]
    anyio.run(main, *(arguments + [10, 50][len(arguments) :]))

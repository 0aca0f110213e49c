"""``sagents serve`` (stdio) in front of an echo server against the echo server directly.

Both targets are driven by the ``mcp`` SDK's own stdio client in this process: the echo server
is ``tests/mcp/servers/fault_server.py`` (its ``echo`` tool); the proxy is ``sagents serve
--mode auto`` with that server as its only upstream (``mcpServers``), so every call crosses
two stdio hops and the gateway. When ``bench/.venv-peers`` has FastMCP (``bench/setup-peers.sh``),
its proxy (``bench/peers/fastmcp_proxy.py``: ``create_proxy`` of the same server, over stdio) is
measured beside them. Paths alternate over 3 rounds at concurrency 1 and 8; the median round of
each counts; the figure is calls/s through a proxy / calls/s direct, and the host CPU per call
of this (client) process, which does not include the proxies' own processes.

Run: ``.venv/bin/python bench/bench_serve_proxy.py [calls per round, default 200] [--json]``
(``--json`` prints the ratios as the last line, for ``bench/summary.py``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
FAULT = ROOT / "tests" / "mcp" / "servers" / "fault_server.py"
ROUNDS = 3
SERVE = ["-c", "from sagents.cli.main import main; main()", "serve"]
PEERS_PYTHON = ROOT / "bench" / ".venv-peers" / "bin" / "python"
FASTMCP_PROXY = ROOT / "bench" / "peers" / "fastmcp_proxy.py"

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
        async with AsyncExitStack() as stack:
            bare = await stack.enter_async_context(Client(direct))
            gateway = await stack.enter_async_context(Client(proxy))

            async def call_bare() -> object:
                return await bare.call_tool("echo", {"text": "x"})

            async def call_gateway() -> object:
                result = await gateway.call_tool("echo__echo", {"text": "x"})
                assert not result.is_error, result
                return result

            targets: dict[str, Call] = {"direct": call_bare, "sagents serve": call_gateway}
            if _has_fastmcp():
                peer = StdioServerParameters(
                    command=str(PEERS_PYTHON), args=[str(FASTMCP_PROXY), sys.executable, str(FAULT)]
                )
                fastmcp = await stack.enter_async_context(Client(peer))

                async def call_fastmcp() -> object:
                    result = await fastmcp.call_tool("echo", {"text": "x"})
                    assert not result.is_error, result
                    return result

                targets["FastMCP proxy"] = call_fastmcp
            elif not quiet:
                print("FastMCP proxy: not measured (run bench/setup-peers.sh)")
            for _ in range(20):  # warm-up: connections, the proxies' first listing
                for call in targets.values():
                    await call()
            for concurrency in (1, 8):
                seen: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
                for _ in range(ROUNDS):
                    for name, call in targets.items():
                        seen[name].append(await measure(call, total, concurrency))
                rates = {name: statistics.median(r for r, _ in runs) for name, runs in seen.items()}
                cpus = {name: statistics.median(c for _, c in runs) for name, runs in seen.items()}
                for name in targets:
                    if name == "direct":
                        continue
                    label = "" if name == "sagents serve" else f" {name}"
                    figures[f"c={concurrency}{label} ratio"] = rates[name] / rates["direct"]
                    figures[f"c={concurrency}{label} client CPU ratio"] = (
                        cpus[name] / cpus["direct"]
                    )
                if not quiet:
                    print(
                        f"c={concurrency}: direct {rates['direct']:6.0f} calls/s, "
                        + ", ".join(
                            f"{name} {rates[name]:6.0f} calls/s (ratio "
                            f"{rates[name] / rates['direct']:.2f}, client CPU "
                            f"{cpus[name]:.2f} vs {cpus['direct']:.2f} ms/call)"
                            for name in targets
                            if name != "direct"
                        )
                        + " (goal for sagents serve >= 0.6)"
                    )
    return figures


def _has_fastmcp() -> bool:
    if not PEERS_PYTHON.exists():
        return False
    probe = subprocess.run(
        [str(PEERS_PYTHON), "-c", "import fastmcp"], capture_output=True, check=False
    )
    return probe.returncode == 0


if __name__ == "__main__":
    counts = [int(arg) for arg in sys.argv[1:] if not arg.startswith("--")]
    as_json = "--json" in sys.argv[1:]
    result = anyio.run(main, counts[0] if counts else 200, as_json)
    if as_json:
        print(json.dumps(result))

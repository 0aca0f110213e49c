"""``sagents serve`` (stdio) in front of an echo server against the echo server directly.

Both targets are driven by the ``mcp`` SDK's own stdio client in this process: the echo server
is ``tests/mcp/servers/fault_server.py`` (its ``echo`` tool); the proxy is ``sagents serve
--mode auto`` with that server as its only upstream (``mcpServers``), so every call crosses
two stdio hops and the gateway. When ``bench/.venv-peers`` has FastMCP (``bench/setup-peers.sh``),
its proxy (``bench/peers/fastmcp_proxy.py``: ``create_proxy`` of the same server, over stdio) is
measured beside them. Paths alternate over 3 rounds at concurrency 1 and 8; the median round of
each counts. The figures: calls/s through a proxy / calls/s direct; the CPU per call of this
(client) process through a proxy / direct; and the CPU per call of the proxy's own process
(its upstream left out) / the CPU per call of the echo server serving the direct calls (user +
system time from ``/proc``, so Linux only; 10 ms ticks, hence the 150+ calls per round), which
a loaded machine disturbs far less than the calls/s: how heavy the proxy is next to a bare SDK
server.

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


def _children(pid: int) -> list[int]:
    try:
        return [
            int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        ]
    except OSError:
        return []


def _server_pid(matches: Callable[[str], bool]) -> int | None:
    """The child process of this one whose command line ``matches``."""
    for pid in _children(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if matches(cmdline):
            return pid
    return None


def _process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def echo_config(data: str) -> Path:
    """Write, in ``data``, the ``mcpServers`` file of a gateway whose only upstream is the echo
    server (``read_only``); return its path."""
    config = Path(data) / "mcp_servers.json"
    servers = {"echo": {"command": sys.executable, "args": [str(FAULT)], "permission": "read_only"}}
    config.write_text(json.dumps({"mcpServers": servers}))
    return config


async def measure(
    call: Call, total: int, concurrency: int, server: int | None
) -> tuple[float, float, float]:
    """(calls/s, client CPU ms per call, ``server`` process CPU ms per call) for ``total``
    calls, ``concurrency`` at once."""
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    began, cpu, server_cpu = time.perf_counter(), time.process_time(), _process_cpu_s(server)
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return (
        total / (time.perf_counter() - began),
        (time.process_time() - cpu) / total * 1e3,
        (_process_cpu_s(server) - server_cpu) / total * 1e3,
    )


async def main(total: int, quiet: bool) -> dict[str, float]:
    direct = StdioServerParameters(command=sys.executable, args=[str(FAULT)])
    with tempfile.TemporaryDirectory() as data:
        config = echo_config(data)
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
            servers = {
                "direct": _server_pid(
                    lambda line: "fault_server.py" in line and "fastmcp_proxy" not in line
                ),
                "sagents serve": _server_pid(lambda line: "sagents.cli.main" in line),
                "FastMCP proxy": _server_pid(lambda line: "fastmcp_proxy.py" in line),
            }
            for _ in range(20):  # warm-up: connections, the proxies' first listing
                for call in targets.values():
                    await call()
            for concurrency in (1, 8):
                seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in targets}
                for _ in range(ROUNDS):
                    for name, call in targets.items():
                        seen[name].append(
                            await measure(call, total, concurrency, servers.get(name))
                        )
                rate, client, server = (
                    {name: statistics.median(run[i] for run in runs) for name, runs in seen.items()}
                    for i in range(3)
                )
                for name in targets:
                    if name == "direct":
                        continue
                    label = "" if name == "sagents serve" else f" {name}"
                    figures[f"c={concurrency}{label} ratio"] = rate[name] / rate["direct"]
                    figures[f"c={concurrency}{label} client CPU ratio"] = (
                        client[name] / client["direct"]
                    )
                    if server["direct"] > 0 and server[name] > 0:
                        figures[f"c={concurrency}{label} server CPU ratio"] = (
                            server[name] / server["direct"]
                        )
                if not quiet:
                    print(
                        f"c={concurrency}: direct {rate['direct']:6.0f} calls/s (echo server "
                        f"{server['direct']:.2f} ms CPU/call); "
                        + "; ".join(
                            f"{name} {rate[name]:6.0f} calls/s, ratio "
                            f"{rate[name] / rate['direct']:.2f} (goal for sagents serve >= 0.6), "
                            f"client CPU {client[name]:.2f} vs {client['direct']:.2f} ms/call, "
                            f"proxy CPU {server[name]:.2f} ms/call"
                            for name in targets
                            if name != "direct"
                        )
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

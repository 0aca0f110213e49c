"""Cost of running an upstream stdio server in its own sandbox (docs/mcp.md, "Sandboxed
servers"), against the same server on the host, measured in the same run.

For each of N rounds, interleaved: start the server and list its tools (``add_server``), make
M calls, close it (``remove_server``) — once on the host (the baseline), once sandboxed. The
server is the stdlib-only tests/mcp/servers/escape_server.py, so the figures are the sandbox's
own cost, not a runtime's start-up. With ``--npx`` it is the reference filesystem server
started as docs/mcp.md ("Through npx and uvx, offline") starts it,
``npx --offline -y @modelcontextprotocol/server-filesystem@<version> <root>``, from a copy of
the npm cache ``scripts/setup.sh --test`` fills (the host's run from a copy of its own), so the
figures are what a sandbox adds to a real npx start. Prints milliseconds per start and per
call and the ratio to the host. Not a test.

Usage: .venv/bin/python bench/bench_sandboxed_server.py [N] [M] [--npx]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio
from mcp import StdioServerParameters

from sagents.mcp import MCPSupervisor, ServerSandbox, ServerSettings
from sagents.sandbox import DEFAULT_SANDBOX_UID
from sagents.sandbox._bwrap import python_runtime

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests" / "mcp" / "servers"
NPM_CACHE = ROOT / ".peers" / "npm-cache"
PACKAGE = "@modelcontextprotocol/server-filesystem"


def _copy_cache(target: Path, owner: int | None) -> None:
    """A copy of the filled npm cache at ``target``, given to ``owner`` (a uid) when set."""
    if not (NPM_CACHE / ".filled").is_file():
        raise SystemExit(f"{str(NPM_CACHE)!r} is missing: run scripts/setup.sh --test")
    shutil.copytree(NPM_CACHE, target, symlinks=True)
    if owner is not None:
        for directory, dirs, files in os.walk(target.parent):
            for name in (*dirs, *files):
                os.lchown(os.path.join(directory, name), owner, owner)
        os.chown(target.parent, owner, owner)


def _npx(root: str) -> tuple[StdioServerParameters, StdioServerParameters, ServerSandbox, str]:
    """Host and sandboxed params of the npx filesystem server, its sandbox, and a tool."""
    peers = json.loads((ROOT / "tests" / "peers" / "package.json").read_text())
    spec = f"{PACKAGE}@{peers['dependencies'][PACKAGE]}"
    data = Path(root) / "data"
    data.mkdir()
    _copy_cache(Path(root) / "host-cache" / ".npm", None)
    _copy_cache(Path(root) / "home" / ".npm", DEFAULT_SANDBOX_UID if os.geteuid() == 0 else None)
    args = ["--offline", "-y", spec, str(data)]
    host_env = {
        "npm_config_cache": f"{root}/host-cache/.npm",
        "npm_config_update_notifier": "false",
    }
    host = StdioServerParameters(command="npx", args=args, env=host_env)
    boxed = StdioServerParameters(command="npx", args=args)
    box = ServerSandbox(writable=(str(data),), home=f"{root}/home")
    return host, boxed, box, "list_allowed_directories"


async def _round(
    sup: MCPSupervisor,
    params: StdioServerParameters,
    settings: ServerSettings,
    calls: int,
    tool: str,
) -> tuple[float, float]:
    start = time.perf_counter()
    await sup.add_server("bench", params, settings)
    started = time.perf_counter()
    for _ in range(calls):
        result = await sup.call_tool("bench", tool)
        if result.is_error:
            raise SystemExit(f"the call failed: {result!r}")
    called = time.perf_counter()
    await sup.remove_server("bench")
    return started - start, (called - started) / calls


async def main(rounds: int, calls: int, npx: bool) -> None:
    with tempfile.TemporaryDirectory() as root:
        if npx:
            host_params, boxed_params, box, tool = _npx(root)
            # server-filesystem ignores server/discover too: the same short probe.
            host = ServerSettings(connect_timeout=120.0, discover_timeout=0.05)
        else:
            script = [str(SERVERS / "escape_server.py")]
            host_params = boxed_params = StdioServerParameters(
                command=python_runtime()[1], args=script
            )
            box = ServerSandbox(readable=(str(SERVERS),), home=f"{root}/home")
            tool = "whoami"
            # The test server ignores server/discover: a short probe keeps its wait out.
            host = ServerSettings(discover_timeout=0.05)
        kinds = {
            "host": (host_params, host),
            "sandbox": (boxed_params, replace(host, sandbox=box)),
        }
        times: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
        async with MCPSupervisor(log_dir=Path(root) / "logs") as sup:
            for params, settings in kinds.values():
                await _round(sup, params, settings, 2, tool)  # warm up
            for _ in range(rounds):
                for kind, (params, settings) in kinds.items():
                    times[kind].append(await _round(sup, params, settings, calls, tool))
    server = "npx server-filesystem" if npx else "stdlib test server"
    print(f"{server} started and listed {rounds}x each, {calls} calls per start")
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
    npx = "--npx" in sys.argv[1:]
    counts = [int(a) for a in sys.argv[1:] if a != "--npx"]
    rounds = counts[0] if counts else 10
    calls = counts[1] if len(counts) > 1 else 50
    anyio.run(main, rounds, calls, npx)

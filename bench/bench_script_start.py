"""Start-up cost of an empty run_script inside a running gateway, against ``python -c pass``.

An empty script (``pass``) runs through the gateway's run_script (``GatewayScripts.run``: the
session's sandbox and ``RunScriptTool``, policy, records, the SQLite audit entry, bubblewrap,
bootstrap, teardown), in rounds interleaved with:

- ``python -c pass`` and ``python -I -S -c pass`` of the same interpreter (fresh processes);
- the same empty run through a launcher that keeps no spare and tears each sandbox down before
  the result (``cold``: what every run paid before spare sandboxes, docs/run_script.md);
- a run whose script only imports the session's typed stubs (``from agent_tools.stubs import
  fleet``: the host generates the module on the request, docs/run_script.md "Typed stubs"),
  against one whose script makes one request (``tools()``: what the first request of a script
  costs, whatever it is), both in the running gateway; skipped on code from before typed
  stubs.

Each round waits half a second before each run (a model's turn is longer than that), so that
the gateway's spare is ready, as it is between the turns of a real session. Prints medians in
milliseconds and the differences to both baselines. Not a test.

Usage: ``.venv/bin/python bench/bench_script_start.py [ROUNDS] [--json]`` (``--json`` adds, as
the last line, the medians' differences for ``bench/summary.py``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from sagents.audit._store import SqliteAuditStore
from sagents.core._limits import ScriptLimits
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.gateway._scripts import GatewayScripts
from sagents.gateway._workspaces import Workspaces
from sagents.progress._hub import ProgressHub
from sagents.sandbox import LocalSandbox, SandboxParams
from sagents.sandbox._bwrap import python_runtime
from sagents.script._runtime import install_runtime
from sagents.script._sandbox_launcher import SandboxLauncher
from sagents.script._session import RunScriptTool
from sagents.tool._context import SessionContext
from sagents.tool.tool_manager import ToolManager

PAUSE_S = 0.5  # before each run, as between a model's turns
STUBS_SCRIPT = "from agent_tools.stubs import fleet\n"
STUBS_LABEL = "stubs import in a running gateway"
REQUEST_SCRIPT = "from agent_tools import tools\ntools()\n"  # the first request, whatever it is
REQUEST_LABEL = "tools() in a running gateway"


async def _fleet_tools() -> list[tuple[ToolSpec, Any]]:
    """The fleet demo's tools, as the gateway lists them (never called here)."""
    from mcp import Client

    from sagents.demo.fleet_server import build_server
    from sagents.mcp._convert import tool_to_spec
    from sagents.mcp._settings import ServerSettings

    async def handle(arguments: dict[str, Any], call: Any) -> ToolResult:
        return ToolResult.from_structured({})

    async with Client(build_server()) as client:
        listed = await client.list_tools()
    settings = ServerSettings()
    return [
        (tool_to_spec("fleet", tool, settings, protocol_version=None), handle)
        for tool in listed.tools
    ]


def _has_stubs() -> bool:
    try:
        import sagents.script._stubs  # noqa: F401  # present since typed stubs
    except ImportError:
        return False
    return True


SESSION = "0123456789abcdef0123456789abcdef"


def _cold_launcher(sandbox: LocalSandbox) -> SandboxLauncher:
    """A launcher that keeps no spare and is never entered (every run starts cold). Also runs
    against code from before spare sandboxes (``PYTHONPATH`` at an export of it), whose
    launcher takes no ``spare_idle_s``."""
    try:
        return SandboxLauncher(sandbox, spare_idle_s=None)
    except TypeError:
        return SandboxLauncher(sandbox)


async def main(rounds: int) -> dict[str, float]:
    python = python_runtime()[1]
    times: dict[str, list[float]] = {
        "python -c pass": [],
        "python -I -S -c pass": [],
        "empty run_script, cold sandbox": [],
        "empty run_script in a running gateway": [],
    }
    if _has_stubs():
        times[REQUEST_LABEL] = []
        times[STUBS_LABEL] = []
    with tempfile.TemporaryDirectory() as data_dir:
        data = Path(data_dir)
        context = SessionContext(session_id=SESSION, permission_mode="auto")
        cold_ws = data / "cold"
        fleet = await _fleet_tools()
        async with (
            ToolManager() as manager,
            GatewayScripts(
                hub=ProgressHub(),
                workspaces=Workspaces(data / "workspaces"),
                limits=ScriptLimits(),
                data_dir=data,
            ) as gateway,
            LocalSandbox(SandboxParams(workspace=str(cold_ws))) as sandbox,
            RunScriptTool(
                tools=manager,
                session=context,
                sandbox=sandbox,
                runtime=install_runtime(data),
                audit=SqliteAuditStore(path=data / "cold-audit.sqlite3"),
                hub=ProgressHub(),
                launcher=_cold_launcher(sandbox),
            ) as cold,
        ):

            async def in_gateway() -> Any:
                return await gateway.run(
                    {"code": "pass\n", "tools": []}, context, tools=manager, tool_call_id=None
                )

            def in_gateway_running(code: str) -> Any:
                async def run() -> Any:
                    return await gateway.run(
                        {"code": code, "tools": []}, context, tools=manager, tool_call_id=None
                    )

                return run

            async def in_cold() -> Any:
                return await cold.run("pass\n")

            async def timed(label: str, run: Any) -> None:
                await anyio.sleep(PAUSE_S)
                started = time.perf_counter()
                result = await run()
                took = time.perf_counter() - started
                if result.is_error:
                    raise SystemExit(f"the run failed: {result.text}")
                times[label].append(took)

            def bare(label: str, *flags: str) -> None:
                started = time.perf_counter()
                subprocess.run([python, *flags, "-c", "pass"], check=True)
                times[label].append(time.perf_counter() - started)

            for pair in fleet:
                manager.register_tool(pair)
            await in_gateway()  # warm-up: the session's sandbox, its first (cold) run
            await in_cold()
            for _ in range(rounds):
                bare("python -c pass")
                bare("python -I -S -c pass", "-I", "-S")
                await timed("empty run_script, cold sandbox", in_cold)
                await timed("empty run_script in a running gateway", in_gateway)
                if STUBS_LABEL in times:
                    await timed(REQUEST_LABEL, in_gateway_running(REQUEST_SCRIPT))
                    await timed(STUBS_LABEL, in_gateway_running(STUBS_SCRIPT))
    medians = {label: statistics.median(samples) * 1000 for label, samples in times.items()}
    base, isolated = medians["python -c pass"], medians["python -I -S -c pass"]
    print(f"empty run_script, median of {rounds} interleaved rounds (ms)")
    print(f"{'':<40}{'ms':>8}{'- python':>10}{'- python -I -S':>16}")
    for label, median in medians.items():
        print(f"{label:<40}{median:>8.1f}{median - base:>10.1f}{median - isolated:>16.1f}")
    figures = {
        "gateway - python -c pass (ms)": medians["empty run_script in a running gateway"] - base,
        "gateway - python -I -S -c pass (ms)": (
            medians["empty run_script in a running gateway"] - isolated
        ),
        "cold - python -I -S -c pass (ms)": medians["empty run_script, cold sandbox"] - isolated,
    }
    if STUBS_LABEL in medians:
        figures["stubs import - tools(), in the gateway (ms)"] = (
            medians[STUBS_LABEL] - medians[REQUEST_LABEL]
        )
    return figures


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--json"]
    figures = anyio.run(main, int(arguments[0]) if arguments else 10)
    if "--json" in sys.argv[1:]:
        print(json.dumps(figures))

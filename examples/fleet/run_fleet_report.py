"""Run ``fleet_report.py`` through run_script against the fleet server, and print what the model
would receive. Usage: ``.venv/bin/python examples/fleet/run_fleet_report.py [WORKSPACE]``.

Uses the plain launcher (no sandbox) until the sandbox layer provides its launcher.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bridge import HERE, fleet_client, make_call_tool, spec_from_mcp

from sagents.audit import default_data_dir
from sagents.script import ScriptProgressUpdate, ScriptRequest, ScriptRunner, install_runtime


def show_progress(update: ScriptProgressUpdate) -> None:
    """A crude live line (the progress channel throttles to 1/s; here: every 50 calls)."""
    if update.status == "running" and update.calls % 50:
        return
    done, total = update.done or 0, update.total or 0
    line = f"\r{update.calls} calls, {update.failures} failed, script: {done:g}/{total:g}"
    print(line, end="", file=sys.stderr)


async def main(workspace: Path) -> int:
    runtime = install_runtime(default_data_dir())
    async with fleet_client() as client:
        listed = await client.list_tools()
        specs = [spec_from_mcp(tool, "fleet") for tool in listed.tools]
        runner = ScriptRunner(
            specs=specs,
            call_tool=make_call_tool(client, "fleet"),
            workspace=workspace,
            runtime=runtime,
            mode="auto",
            on_progress=show_progress,
        )
        code = (HERE / "fleet_report.py").read_text()
        result = await runner.run(ScriptRequest(code=code, description="fleet report"))
    print(file=sys.stderr)
    print(result.output)
    return 0 if result.status == "ok" else 1


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="fleet-"))
    sys.exit(anyio.run(main, target))

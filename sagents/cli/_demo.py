"""``sagents demo``: the main job on embedded defaults (docs/cli_run_script.md).

With no configuration at all: start the bundled fleet MCP server (:mod:`sagents.demo`), run the
fleet script through run_script in the sandbox with a live progress bar (stderr), then print the
model-facing result, the records directory and the run's audit entry. The workspace is a new
temporary directory (kept, so the records can be read) unless ``--workspace`` is given.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from sagents.audit._store import SqliteAuditStore
from sagents.cli._run_script import exit_code_of, setup_logging
from sagents.cli._script_host import LiveProgress, failure_object, run_script_code
from sagents.cli._workspace import prepare_workspace
from sagents.demo import FLEET_SCRIPT, demo_config
from sagents.errors import ConfigError, SagentsError

__all__ = ["demo", "run_demo"]


async def run_demo(workspace: Path, audit: SqliteAuditStore) -> dict[str, Any]:
    """Run the fleet job and return the ``--json`` object of the run, with ``records_path``
    (absolute) and ``audit`` (the run's audit entry, or None when it could not be read)."""
    with LiveProgress() as live:
        result = await run_script_code(
            code=FLEET_SCRIPT.read_text(encoding="utf-8"),
            config=demo_config(),
            workspace=workspace,
            description="sagents demo: status of every device of the fleet",
            mode="auto",
            audit=audit,
            on_progress=live.update,
        )
    out = result.to_dict()
    out["script_id"] = out["script_id"] or None  # no run (sandbox_error)
    out["records_path"] = str(workspace / result.records_dir) if result.records_dir else None
    out["audit"] = None
    for entry in await audit.entries(kind="gateway_call", limit=20):
        if entry.data.get("script_id") == result.script_id:
            data = {k: v for k, v in entry.data.items() if k != "script"}
            out["audit"] = {"ts": entry.ts, "tool": entry.tool, "status": entry.status, **data}
            break
    return out


def demo(
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Workspace directory (default: a new temporary one)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")
    ] = False,
) -> None:
    """Run the bundled fleet job through run_script: 500 devices, one script, one summary."""
    setup_logging()
    try:
        if workspace is None:
            ws = Path(tempfile.mkdtemp(prefix="sagents-demo-")).resolve()
        else:
            ws = prepare_workspace(workspace, command="sagents demo")
        out = anyio.run(run_demo, ws, SqliteAuditStore())
    except KeyboardInterrupt:
        out = failure_object("cancelled", "interrupted (Ctrl-C)")
    except ConfigError as error:  # a bad --workspace
        out = failure_object("usage_error", str(error), hint=error.hint)
    except SagentsError as error:
        out = failure_object("error", str(error), hint=error.hint)
    if as_json:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    else:
        lines = [str(out["output"]).rstrip("\n"), ""]
        if out.get("records_path"):  # none when the run never started (e.g. no bubblewrap)
            lines.append(f"records: {out['records_path']}")
        if out.get("audit"):
            lines.append(f"audit:   {json.dumps(out['audit'], ensure_ascii=False)}")
        sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    raise typer.Exit(exit_code_of(out["status"]))

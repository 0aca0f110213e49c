"""The console's Runs and Run pages (docs/console.md): every run_script run from the records
under the sessions' workspaces and the live progress of the running ones, one run's script,
output, calls and record files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from sagents.gateway._web_auth import Principal
from sagents.gateway.console._auth import ConsoleSession
from sagents.gateway.console._records import (
    CALLS_PAGE,
    find_run,
    list_runs,
    read_calls,
    read_shown,
    valid_run_id,
)

if TYPE_CHECKING:
    from sagents.gateway.console._app import Console, ConsoleData

__all__ = ["AUDIT_SCAN", "RECORD_FILES", "RunPages"]

AUDIT_SCAN: Final = 5000  # audit entries read for one page (then filtered)
RECORD_FILES: Final = ("script.py", "calls.jsonl", "output.txt", "run.json")


class RunPages:
    """The Runs and Run pages of a console (its principal's view, its templates)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @property
    def data(self) -> ConsoleData:
        """What the console serves."""
        return self.console.data

    def _run_rows(self, principal: Principal) -> list[dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for record in list_runs(self.data.workspaces):
            if not self.console.visible(principal, record.session_id):
                continue
            info = record.info
            rows[record.script_id] = {
                "script_id": record.script_id,
                "session_id": record.session_id,
                "tool": "run_script",
                "status": record.status,
                "calls": info.get("calls", 0),
                "failures": info.get("failed", 0),
                "elapsed_s": info.get("duration_s"),
                "started": record.started,
                "done": None,
                "total": None,
                "message": None,
                "description": "",
            }
        if self.data.live is not None:
            for run in self.data.live.runs.values():
                if not self.console.visible(principal, run.session_id):
                    continue
                progress = run.progress
                row = rows.setdefault(
                    run.script_id,
                    {"script_id": run.script_id, "session_id": run.session_id,
                     "tool": "run_script", "started": run.first_seen},
                )  # fmt: skip
                row.update(
                    status=progress.get("status", "running"),
                    calls=progress.get("calls", 0),
                    failures=progress.get("failures", 0),
                    elapsed_s=progress.get("elapsed_s"),
                    done=progress.get("done"),
                    total=progress.get("total"),
                    message=progress.get("message"),
                    description=run.description,
                )
        return sorted(rows.values(), key=lambda r: r["script_id"], reverse=True)

    async def runs(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        rows = await anyio.to_thread.run_sync(self._run_rows, p)
        return self.console.render(request, session, "runs.html", runs=rows)

    def _run_page(self, request: Request, p: Principal) -> dict[str, Any] | None:
        script_id = request.path_params["script_id"]
        if not valid_run_id(script_id):
            return None
        live = self.data.live.run_of(script_id) if self.data.live is not None else None
        session_id = live.session_id if live is not None else None
        record = find_run(self.data.workspaces, script_id, session_id)
        if record is None and live is None:
            return None
        owner_session = (
            live.session_id if live is not None else (record.session_id if record else "")
        )
        if not self.console.visible(p, owner_session):
            return None
        try:
            page = max(int(request.query_params.get("page", "0")), 0)
        except ValueError:
            page = 0
        script, script_cut = read_shown(record.path / "script.py") if record else ("", False)
        output, output_cut = read_shown(record.path / "output.txt") if record else ("", False)
        calls, more = read_calls(record.path, page) if record else ([], False)
        info = record.info if record else {}
        progress = live.progress if live is not None else {}
        status = progress.get("status") or (record.status if record else "running")
        description = live.description if live is not None else ""
        return {
            "script_id": script_id,
            "session_id": owner_session,
            "status": status,
            "live": status == "running",
            "info": info,
            "progress": progress,
            "description": description,
            "script": script,
            "script_cut": script_cut,
            "output": output,
            "output_cut": output_cut,
            "calls": calls,
            "calls_page": page,
            "calls_more": more,
            "calls_first": page * CALLS_PAGE,
            "files": RECORD_FILES if record else (),
            "streams": self.data.live.text_of(live.tool_call_id)
            if self.data.live is not None and live is not None
            else {},
        }

    async def _audit_description(self, script_id: str) -> str:
        """A finished run's description, from its audit entry ("" when there is none)."""
        if not self.data.audit_path.is_file():
            return ""
        for entry in await self.console.audit.entries(kind="gateway_call", limit=AUDIT_SCAN):
            if entry.data.get("script_id") == script_id:
                return str(entry.data.get("description", ""))
        return ""

    async def run(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        context = await anyio.to_thread.run_sync(self._run_page, request, p)
        if context is None:
            return PlainTextResponse("no such run", status_code=404)
        if not context["description"]:
            context["description"] = await self._audit_description(context["script_id"])
        return self.console.render(request, session, "run.html", **context)

    async def run_file(self, request: Request, session: ConsoleSession, p: Principal) -> Response:
        name = request.path_params["name"]
        script_id = request.path_params["script_id"]
        if name not in RECORD_FILES or not valid_run_id(script_id):
            return PlainTextResponse("no such record", status_code=404)
        live = self.data.live.run_of(script_id) if self.data.live is not None else None
        record = find_run(self.data.workspaces, script_id, live.session_id if live else None)
        if record is None or not self.console.visible(
            p, record.session_id or (live.session_id if live else "")
        ):
            return PlainTextResponse("no such record", status_code=404)
        text, _ = await anyio.to_thread.run_sync(read_shown, record.path / name, 16 * 1024 * 1024)
        return PlainTextResponse(text, headers={"Content-Disposition": "inline"})

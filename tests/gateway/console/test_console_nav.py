"""The console's navigation shows how many approvals wait, on every page; the Runs page shows
when each run started."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from sagents.gateway._pending import PendingApproval
from sagents.gateway._settings import GatewaySettings
from sagents.gateway.console import data_dir_console
from tests.gateway.console.test_console_http import call, console_server, logged_in, operator_login

pytestmark = pytest.mark.anyio

PAGES = ["runs", "approvals", "background", "audit", "todo"]


def _nav_count(html: str) -> str | None:
    found = re.search(r'<span class="count" id="nav-pending"[^>]*>(\d+)</span>', html)
    return found.group(1) if found else None


async def test_every_page_shows_the_number_of_approvals_waiting_in_the_navigation() -> None:
    settings = GatewaySettings(transport="http", port=0)
    with anyio.fail_after(30):
        async with (
            console_server(settings) as (base, gateway),
            httpx2.AsyncClient() as http,
            anyio.create_task_group() as tg,
        ):
            await operator_login(http, base)
            before = {page: (await http.get(f"{base}/console/{page}")).text for page in PAGES}
            for tool in ("fleet__reboot", "fleet__wipe"):
                item = PendingApproval.for_request(call(tool, session_id="s1"), owner="")
                tg.start_soon(gateway.pending.ask, item)
            while len(gateway.pending.pending()) < 2:
                await gateway.pending.changed()
            after = {page: (await http.get(f"{base}/console/{page}")).text for page in PAGES}
            tg.cancel_scope.cancel()
    for page in PAGES:
        assert _nav_count(before[page]) is None, page  # nothing waits: no badge
        assert _nav_count(after[page]) == "2", page


def test_the_runs_page_shows_when_each_run_started(tmp_path: Path) -> None:
    from sagents.script._records import ScriptRecords

    workspace = tmp_path / "workspaces" / "sessions" / ("a" * 32)
    workspace.mkdir(parents=True)
    records = ScriptRecords.create(workspace, "20261201-120000-0123abcd", "print('hi')\n")
    records.write_status({"script_id": "20261201-120000-0123abcd", "status": "ok",
                          "exit_code": 0, "calls": 0, "failed": 0})  # fmt: skip
    records.close()
    with logged_in(data_dir_console(tmp_path), tmp_path) as http:
        page = http.get("/console/runs").text
    assert "<th>Started (UTC)</th>" in page
    started = re.search(r'<td class="started">([^<]*)</td>', page)
    assert started is not None, page[-2000:]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", started.group(1)), started.group(1)
    shown = time.mktime(time.strptime(started.group(1), "%Y-%m-%d %H:%M:%S")) - time.timezone
    assert abs(shown - time.time()) < 24 * 3600  # today's run, not the epoch

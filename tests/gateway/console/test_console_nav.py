"""The console's navigation shows how many approvals wait, on every page; the Runs page shows
when each run started."""

from __future__ import annotations

import json
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


async def test_every_pages_event_stream_keeps_the_navigation_count_live() -> None:
    """A list page's stream and a run page's stream (``?run=``) both say what waits when they
    connect and again when an approval is asked or answered (console.js shows the count)."""
    settings = GatewaySettings(transport="http", port=0)
    item = PendingApproval.for_request(call("fleet__reboot", session_id="s1"), owner="")
    queries = ("", "?run=20261201-120000-0123abcd")
    seen: dict[str, list[list[str]]] = {query: [] for query in queries}
    send, states = anyio.create_memory_object_stream[tuple[str, list[str]]](16)

    async def until(count: int) -> None:
        """Receive states until every stream has sent ``count``."""
        while not all(len(seen[query]) >= count for query in queries):
            query, ids = await states.receive()
            seen[query].append(ids)

    with anyio.fail_after(60):
        async with (
            console_server(settings) as (base, gateway),
            httpx2.AsyncClient(timeout=60) as http,
            anyio.create_task_group() as tg,
        ):
            await operator_login(http, base)

            async def listen(query: str) -> None:
                async with http.stream("GET", f"{base}/console/events{query}") as events:
                    async for line in events.aiter_lines():
                        event = json.loads(line.removeprefix("data:") or "{}")
                        if event.get("type") == "approvals.state":
                            await send.send((query, event["ids"]))

            for query in queries:
                tg.start_soon(listen, query)
            await until(1)  # both streams are subscribed: no change can be missed
            tg.start_soon(gateway.pending.ask, item)
            await until(2)
            assert gateway.pending.answer(item.approval_id, "deny", by=None)
            await until(3)
            tg.cancel_scope.cancel()
    for query in queries:
        assert seen[query] == [[], [item.approval_id], []], query

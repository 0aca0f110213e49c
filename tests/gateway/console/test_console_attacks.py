"""The console under attack from loopback: headers on every response, a flood of anonymous
sessions, and the race of two answers under ``--approvals both``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest

from sagents.gateway._pending import PendingApproval, PendingApprovals
from sagents.gateway._settings import GatewaySettings
from sagents.gateway.console._auth import MAX_SESSIONS, ConsoleAuth, Principal
from sagents.gateway.console._records import MAX_CALL_LINE
from tests.gateway.console.test_console_http import (
    TOKEN,
    call,
    console_server,
    logged_in,
    login,
)

pytestmark = pytest.mark.anyio


async def test_static_files_and_unknown_console_paths_carry_the_csp() -> None:
    settings = GatewaySettings(transport="http", port=0, bearer_token=TOKEN)
    with anyio.fail_after(20):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            answers = [
                await http.get(f"{base}/console/{path}")
                for path in ("static/console.js", "static/console.css", "static/none.js", "nope")
            ]
    assert [a.status_code for a in answers] == [200, 200, 404, 404]
    for answer in answers:
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"], answer.url
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"


def test_anonymous_sessions_never_evict_a_logged_in_one() -> None:
    auth = ConsoleAuth()
    operator = auth.new_session(Principal(operator=True))
    for _ in range(MAX_SESSIONS + 10):
        auth.new_session()  # a page load without a cookie, as anyone on the port can make
    assert auth.session(operator.sid) is operator


async def test_a_flood_of_cookieless_requests_does_not_log_the_operator_out() -> None:
    settings = GatewaySettings(transport="http", port=0, bearer_token=TOKEN)
    with anyio.fail_after(120):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            assert (await login(http, base)).status_code == 303
            async with httpx2.AsyncClient() as anonymous:
                for _ in range(MAX_SESSIONS + 1):
                    await anonymous.get(f"{base}/console/login")
                    anonymous.cookies.clear()
            after = await http.get(f"{base}/console/runs")
    assert after.status_code == 200


async def test_with_both_a_console_answer_after_the_clients_is_refused() -> None:
    pending = PendingApprovals()
    item = PendingApproval.for_request(call("y"), owner="")
    client_answered = anyio.Event()
    console_answer: list[bool] = []

    async def client() -> str:
        client_answered.set()
        return "deny"

    async def console() -> None:
        await client_answered.wait()
        console_answer.append(pending.answer(item.approval_id, "allow_once", by=None))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(console)
            got = await pending.ask(item, client=client)  # type: ignore[arg-type]
    assert got == "deny"  # the first answer wins
    assert console_answer == [False]  # and the console is told it came too late


def test_records_with_ill_typed_fields_and_a_huge_line_still_render(tmp_path: Path) -> None:
    from sagents.gateway.console import data_dir_console

    run_id = "20261201-120000-0123abcd"
    run_dir = tmp_path / "workspaces" / "sessions" / ("a" * 32) / ".agent" / "scripts" / run_id
    run_dir.mkdir(parents=True)
    odd = {"status": "ok", "duration_s": "x", "calls": "many", "started": "x", "exit_code": "e"}
    (run_dir / "run.json").write_text(json.dumps(odd))
    (run_dir / "script.py").write_text("print(1)\n")
    huge = "A" * (2 * MAX_CALL_LINE)
    lines = [{"ts": "x", "tool": "t1", "duration_s": "y", "arguments": {}}, huge,
             {"ts": 1.0, "tool": "t3", "duration_s": 0.5, "arguments": {}}]  # fmt: skip
    (run_dir / "calls.jsonl").write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    with logged_in(data_dir_console(tmp_path), tmp_path) as http:
        runs = http.get("/console/runs")
        run = http.get(f"/console/runs/{run_id}")
    assert runs.status_code == 200
    assert run_id in runs.text
    assert run.status_code == 200
    assert "t1" in run.text
    assert "t3" in run.text  # the line after the huge one is still read as its own call
    assert huge not in run.text

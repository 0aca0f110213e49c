"""The console over HTTP, without a browser: login, cookie flags, CSRF, Origin and Host checks,
headers, escaping, and the pending-approval store it answers through."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from sagents.audit._store import AuditEntry, SqliteAuditStore, default_data_dir
from sagents.core._permissions import PermissionClass
from sagents.gateway._http_server import secure_app, serve_asgi, serve_http, web_auth_of
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._pending import PendingApproval, PendingApprovals
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings
from sagents.gateway.console import data_dir_console
from sagents.tool._approval import ApprovalRequest
from tests.gateway.fakes import FakeProvider

pytestmark = pytest.mark.anyio

TOKEN = "operator-token-1"
XSS = "<script>alert(1)</script><b>bold</b>\x1b[31m"


@asynccontextmanager
async def console_server(settings: GatewaySettings) -> AsyncIterator[tuple[str, Gateway]]:
    provider = FakeProvider()
    async with (
        Gateway(provider, progress=provider.progress, approvals="console") as gateway,
        anyio.create_task_group() as tg,
    ):
        port = await tg.start(serve_http, gateway, settings)
        yield f"http://127.0.0.1:{port}", gateway
        tg.cancel_scope.cancel()


def call(
    tool: str, *, permission: PermissionClass = "write", session_id: str = ""
) -> ApprovalRequest:
    return ApprovalRequest.for_tool_call(tool, {}, permission=permission, session_id=session_id)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert found is not None, html[:500]
    return found.group(1)


async def operator_login(http: httpx2.AsyncClient, base: str) -> None:
    """Log ``http`` in as the operator through the login URL the gateway prints at start (the
    operator secret of its data directory)."""
    secret = OperatorSecret.load_or_create(default_data_dir())
    answer = await http.get(f"{base}/console/?token={secret.value}")
    assert answer.status_code == 303, answer.text[:500]


def logged_in(app: Starlette, data_dir: Path) -> TestClient:
    """A test client of ``sagents console --data-dir data_dir``'s app, logged in as the
    operator through its login URL (the secret of that data directory); use it in ``with``."""
    http = TestClient(app)
    http.get(f"/console/?token={OperatorSecret.load_or_create(data_dir).value}")
    return http


async def login(http: httpx2.AsyncClient, base: str, token: str = TOKEN) -> httpx2.Response:
    page = await http.get(f"{base}/console/login")
    return await http.post(
        f"{base}/console/login", data={"csrf": csrf_of(page.text), "token": token}
    )


async def test_without_the_token_the_console_refuses_and_asks_for_it() -> None:
    settings = GatewaySettings(transport="http", port=0, bearer_token=TOKEN)
    with anyio.fail_after(20):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            refused = await http.get(f"{base}/console/runs")
            events = await http.get(f"{base}/console/events")
            wrong = await login(http, base, token="nope")
            right = await login(http, base)
            runs = await http.get(f"{base}/console/runs")
    assert refused.status_code == 401
    assert 'name="token"' in refused.text
    assert events.status_code == 401
    assert wrong.status_code == 401
    assert "not valid" in wrong.text
    assert right.status_code == 303
    assert runs.status_code == 200
    assert "<h1>Runs</h1>" in runs.text


async def test_the_session_cookie_is_httponly_samesite_strict_and_changes_at_login() -> None:
    settings = GatewaySettings(transport="http", port=0, bearer_token=TOKEN)
    with anyio.fail_after(20):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            first = await http.get(f"{base}/console/login")
            before = first.cookies.get("sagents_console")
            page_csrf = csrf_of(first.text)
            answer = await http.post(
                f"{base}/console/login", data={"csrf": page_csrf, "token": TOKEN}
            )
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/console/" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback
    assert TOKEN not in cookie
    assert answer.cookies.get("sagents_console") not in (None, before)


def test_the_cookie_is_secure_behind_a_tls_proxy(tmp_path: Path) -> None:
    app = data_dir_console(tmp_path, token=TOKEN, secure_cookies=True)
    with TestClient(app) as http:
        page = http.get("/console/login")
    assert "Secure" in page.headers["set-cookie"]


async def test_a_post_without_the_csrf_token_is_refused_with_403() -> None:
    settings = GatewaySettings(transport="http", port=0)
    with anyio.fail_after(20):
        async with console_server(settings) as (base, gateway), httpx2.AsyncClient() as http:
            await operator_login(http, base)
            page = await http.get(f"{base}/console/approvals")
            request = call("fleet__reboot", session_id="s1")
            item = PendingApproval.for_request(request, owner="")
            async with anyio.create_task_group() as tg:
                answers: list[str] = []

                async def ask() -> None:
                    answers.append(await gateway.pending.ask(item))

                tg.start_soon(ask)
                await until_pending(gateway.pending)
                url = f"{base}/console/approvals/{item.approval_id}"
                missing = await http.post(url, data={"decision": "allow_once"})
                wrong = await http.post(url, data={"decision": "allow_once", "csrf": "x"})
                still = [p.approval_id for p in gateway.pending.pending()]
                ok = await http.post(url, data={"decision": "deny", "csrf": csrf_of(page.text)})
    assert missing.status_code == 403
    assert wrong.status_code == 403
    assert still == [item.approval_id]
    assert ok.status_code == 303
    assert answers == ["deny"]


async def test_a_foreign_origin_or_host_is_refused_as_for_mcp() -> None:
    settings = GatewaySettings(transport="http", port=0)
    with anyio.fail_after(20):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            await operator_login(http, base)
            origin = await http.post(
                f"{base}/console/login", headers={"Origin": "http://evil.example"}
            )
            host = await http.get(f"{base}/console/runs", headers={"Host": "evil.example"})
            same = await http.get(f"{base}/console/runs", headers={"Origin": base})
    assert origin.status_code == 403
    assert host.status_code == 421
    assert same.status_code == 200


async def test_pages_carry_a_csp_without_inline_script_and_no_inline_script() -> None:
    settings = GatewaySettings(transport="http", port=0)
    with anyio.fail_after(20):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            await operator_login(http, base)
            pages = [await http.get(f"{base}/console/{name}")
                     for name in ("runs", "approvals", "background", "audit", "todo")]  # fmt: skip
    for page in pages:
        assert page.status_code == 200, page.url
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert re.search(r"<script(?![^>]*\bsrc=)", page.text) is None  # every script has a src


async def test_model_written_text_renders_literally(tmp_path: Path) -> None:
    store = SqliteAuditStore(path=tmp_path / "audit.sqlite3")
    await store.record(
        AuditEntry(kind="gateway_call", ts=1.0, tool="run_script", status="ok",
                   session_id="s", data={"description": XSS, "script_id": "x"})
    )  # fmt: skip
    app = data_dir_console(tmp_path)
    with logged_in(app, tmp_path) as http:
        page = http.get("/console/audit")
    assert "<script>alert(1)" not in page.text
    assert "<b>bold</b>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;\\x1b[31m" in page.text


async def test_the_audit_filters_by_tool_status_session_time_and_description(
    tmp_path: Path,
) -> None:
    store = SqliteAuditStore(path=tmp_path / "audit.sqlite3")
    rows = [
        ("run_script", "ok", "s1", 1_000.0, "count the devices"),
        ("run_script", "error", "s1", 2_000.0, "reboot the fleet"),
        ("run_script", "ok", "s2", 3_000.0, "count the sensors"),
    ]
    for tool, status, session, ts, description in rows:
        entry = AuditEntry(kind="gateway_call", ts=ts, tool=tool, status=status,
                           session_id=session, data={"description": description})  # fmt: skip
        await store.record(entry)
    app = data_dir_console(tmp_path)

    def shown(query: str) -> list[str]:
        with logged_in(app, tmp_path) as http:
            text = http.get("/console/audit" + query).text
        return re.findall(r'<td class="description literal">([^<]*)</td>', text)

    assert shown("") == ["count the sensors", "reboot the fleet", "count the devices"]
    assert shown("?status=error") == ["reboot the fleet"]
    assert shown("?session=s2") == ["count the sensors"]
    assert shown("?q=COUNT") == ["count the sensors", "count the devices"]
    assert shown("?since=1500&until=2500") == ["reboot the fleet"]
    assert shown("?since=1970-01-01 00:30") == ["count the sensors", "reboot the fleet"]
    assert shown("?tool=other") == []


async def test_a_pending_approval_is_answered_only_by_its_principal_or_the_operator() -> None:
    pending = PendingApprovals()
    item = PendingApproval.for_request(call("fleet__reboot", session_id="s1"), owner="alice")
    answers: list[str] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                answers.append(await pending.ask(item))

            tg.start_soon(ask)
            await until_pending(pending)
            assert pending.pending(owner="bob") == []
            assert pending.answer(item.approval_id, "allow_once", by="bob") is False
            assert pending.answer(item.approval_id, "allow_once", by="alice") is True
    assert answers == ["allow_once"]


async def test_allow_for_this_session_is_never_offered_for_a_script_or_a_destructive_call() -> None:
    pending = PendingApprovals(timeout_s=5)
    destructive = PendingApproval.for_request(call("x", permission="destructive"), owner="")
    write = PendingApproval.for_request(call("y"), owner="")
    assert destructive.rememberable is False
    assert write.rememberable is True
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pending.ask, destructive)
            await until_pending(pending)
            with pytest.raises(ValueError, match="not offered"):
                pending.answer(destructive.approval_id, "allow_session", by=None)
            pending.answer(destructive.approval_id, "deny", by=None)


async def test_an_unanswered_console_approval_is_denied_after_the_timeout() -> None:
    pending = PendingApprovals(timeout_s=0.05)
    item = PendingApproval.for_request(call("y"), owner="")
    with anyio.fail_after(10):
        assert await pending.ask(item) == "deny"
    assert pending.pending() == []


async def test_with_both_the_clients_answer_wins_when_it_comes_first() -> None:
    pending = PendingApprovals()
    item = PendingApproval.for_request(call("y"), owner="")

    async def client() -> str:
        return "allow_once"

    with anyio.fail_after(10):
        assert await pending.ask(item, client=client) == "allow_once"  # type: ignore[arg-type]
    assert pending.pending() == []


async def test_sagents_console_serves_a_data_dir_without_a_gateway(tmp_path: Path) -> None:
    settings = GatewaySettings(transport="http", port=0)
    app = data_dir_console(tmp_path)
    web = web_auth_of(settings, OperatorSecret.load_or_create(tmp_path))
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg, httpx2.AsyncClient() as http:
            secured = lambda p: secure_app(app, settings, p, web=web)  # noqa: E731
            port = await tg.start(serve_asgi, secured, settings)
            anonymous = await http.get(f"http://127.0.0.1:{port}/console/runs")
            secret = OperatorSecret.load_or_create(tmp_path).value
            await http.get(f"http://127.0.0.1:{port}/console/?token={secret}")
            page = await http.get(f"http://127.0.0.1:{port}/console/runs")
            mcp = await http.get(f"http://127.0.0.1:{port}/mcp")
            tg.cancel_scope.cancel()
    assert anonymous.status_code == 401
    assert page.status_code == 200
    assert "No runs yet." in page.text
    assert mcp.status_code == 404


async def until_pending(pending: PendingApprovals) -> None:
    """Return once a request waits (the caller bounds the wait)."""
    while not pending.pending():
        await pending.changed()


async def test_a_direct_call_waits_for_the_console_and_only_its_principals_may_answer() -> None:
    from sagents.gateway._policy import Profile
    from tests.gateway.test_http import client

    ops = Profile(name="ops")
    other = Profile(name="other")
    profiles = {"ops-token": ops, "other-token": other}
    settings = GatewaySettings(
        transport="http", port=0, bearer_token=TOKEN, token_profiles=profiles
    )
    provider = FakeProvider()
    results: list[object] = []
    with anyio.fail_after(30):
        async with (
            Gateway(provider, progress=provider.progress, approvals="console",
                    token_profiles=profiles) as gateway,
            anyio.create_task_group() as tg,
        ):  # fmt: skip
            port = await tg.start(serve_http, gateway, settings)
            base = f"http://127.0.0.1:{port}"

            answered = anyio.Event()

            async def call() -> None:
                async with client(f"{base}/mcp", token="ops-token", mode="legacy") as mcp:
                    results.append(await mcp.call_tool("fleet__configure", {"value": 1}))
                answered.set()

            tg.start_soon(call)
            await until_pending(gateway.pending)
            item = gateway.pending.pending()[0]
            url = f"{base}/console/approvals/{item.approval_id}"
            async with httpx2.AsyncClient() as stranger, httpx2.AsyncClient() as owner:
                assert (await login(stranger, base, token="other-token")).status_code == 303
                listed = await stranger.get(f"{base}/console/approvals")
                refused = await stranger.post(
                    url, data={"decision": "allow_once", "csrf": csrf_of(listed.text)}
                )
                assert (await login(owner, base, token="ops-token")).status_code == 303
                mine = await owner.get(f"{base}/console/approvals")
                denied = await owner.post(
                    url, data={"decision": "deny", "csrf": csrf_of(mine.text)}
                )
            await answered.wait()
            tg.cancel_scope.cancel()
    assert item.approval_id not in listed.text
    assert refused.status_code == 404
    assert item.approval_id in mine.text
    assert "Allow for this session" in mine.text  # a direct call of a write tool
    assert denied.status_code == 303
    result = results[0]
    assert getattr(result, "is_error", None) is True
    assert "was not approved" in str(getattr(result, "content", ""))


async def test_sagents_console_shows_past_runs_their_calls_by_page_and_their_records(
    tmp_path: Path,
) -> None:
    from sagents.gateway.console._records import CALLS_PAGE
    from sagents.script._records import CallRecord, ScriptRecords

    workspace = tmp_path / "workspaces" / "sessions" / ("a" * 32)
    workspace.mkdir(parents=True)
    records = ScriptRecords.create(workspace, "20261201-120000-0123abcd", "print('hi')\n")
    for number in range(CALLS_PAGE + 3):
        records.write_call(CallRecord(ts=1.0, tool="fleet__status", arguments={"n": number},
                                      duration_s=0.1, is_error=False, error_code=None,
                                      summary=f"call {number}"))  # fmt: skip
    records.write_output(b"hi\n")
    records.write_status({"script_id": "20261201-120000-0123abcd", "status": "ok",
                          "exit_code": 0, "calls": CALLS_PAGE + 3, "failed": 0})  # fmt: skip
    records.close()
    app = data_dir_console(tmp_path)
    with logged_in(app, tmp_path) as http:
        runs = http.get("/console/runs").text
        first = http.get("/console/runs/20261201-120000-0123abcd").text
        second = http.get("/console/runs/20261201-120000-0123abcd?page=1").text
        script = http.get("/console/runs/20261201-120000-0123abcd/files/script.py")
        other = http.get("/console/runs/20261201-120000-0123abcd/files/..%2f..%2fetc")
        bad_id = http.get("/console/runs/..%2f..")
    assert "20261201-120000-0123abcd" in runs
    assert first.count("fleet__status") == CALLS_PAGE
    assert 'id="calls-next"' in first
    assert second.count("fleet__status") == 3
    assert "call 52" in second
    assert 'id="calls-next"' not in second
    assert script.text == "print('hi')\n"
    assert script.headers["content-type"].startswith("text/plain")
    assert other.status_code == 404
    assert bad_id.status_code == 404


async def test_the_todo_page_shows_a_sessions_list(tmp_path: Path) -> None:
    from sagents.tool._context import SessionContext
    from sagents.tool.impl._todo import TodoStore

    store = TodoStore(path=tmp_path / "todo.sqlite3")
    context = SessionContext(session_id="b" * 32)
    await store.write(context, [{"id": "t1", "content": XSS, "status": "pending"}])
    app = data_dir_console(tmp_path)
    with logged_in(app, tmp_path) as http:
        page = http.get("/console/todo").text
    assert "b" * 32 in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>bold</b>" not in page


async def test_the_approvals_page_and_its_first_event_name_the_same_pending_ids() -> None:
    """The page reloads while what it shows differs from what the event stream says waits; with
    several requests (ids of both cases) both must list them in one order, or it reloads forever."""
    settings = GatewaySettings(transport="http", port=0)
    items = [
        replace(PendingApproval.for_request(call("fleet__reboot", session_id="s1"), owner=""),
                approval_id=approval_id)
        for approval_id in ("abc", "Abd", "_x", "Zz", "-q")
    ]  # fmt: skip
    with anyio.fail_after(20):
        async with (
            console_server(settings) as (base, gateway),
            httpx2.AsyncClient() as http,
            anyio.create_task_group() as tg,
        ):
            for item in items:
                tg.start_soon(gateway.pending.ask, item)
            while len(gateway.pending.pending()) < len(items):
                await gateway.pending.changed()
            await operator_login(http, base)
            page = await http.get(f"{base}/console/approvals")
            async with http.stream("GET", f"{base}/console/events") as events:
                async for line in events.aiter_lines():
                    if line.startswith("data:"):
                        first = json.loads(line.removeprefix("data:"))
                        break
            tg.cancel_scope.cancel()
    shown = re.search(r'id="approvals" data-pending="([^"]*)"', page.text)
    assert shown is not None, page.text[:500]
    assert first["type"] == "approvals.state"
    assert sorted(first["ids"]) == sorted(i.approval_id for i in items)
    assert shown.group(1) == ",".join(first["ids"])

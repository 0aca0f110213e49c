"""Nothing that can only reach the port is the operator (docs/gateway.md, "Threat model"): the
operator secret, its login URL and bearer use, failed logins limited per client, event streams
that end with their console session, and open streams capped per principal."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import anyio
import httpx2
import pytest

from sagents.audit._store import default_data_dir
from sagents.errors import ConfigError
from sagents.gateway._operator_secret import OPERATOR_SECRET_FILE, OperatorSecret
from sagents.gateway._pending import MAX_PENDING_PER_PRINCIPAL, PendingApproval, PendingApprovals
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._web_auth import LOGIN_BURST, LoginLimiter, Principal, TooManyLogins
from sagents.gateway.console._auth import MAX_SESSIONS, ConsoleAuth
from sagents.gateway.console._live import (
    MAX_CALLS,
    MAX_STREAMS_PER_PRINCIPAL,
    LiveRuns,
    TooManyStreams,
)
from sagents.store._fair import FairMap
from tests.gateway.console.test_console_http import (
    call,
    console_server,
    csrf_of,
    operator_login,
    until_pending,
)

pytestmark = pytest.mark.anyio


def the_secret() -> str:
    return OperatorSecret.load_or_create(default_data_dir()).value


async def test_a_process_that_only_reaches_the_port_cannot_answer_an_approval() -> None:
    """The red team's path: a loopback gateway without tokens, a process on the machine loads
    the approvals page, takes the CSRF token from it and posts "Allow once"."""
    settings = GatewaySettings(transport="http", port=0)  # loopback, no token configured
    answers: list[str] = []
    with anyio.fail_after(30):
        async with console_server(settings) as (base, gateway), anyio.create_task_group() as tg:
            item = PendingApproval.for_request(call("fleet__reboot_device", session_id="s1"),
                                               owner="")  # fmt: skip

            async def ask() -> None:
                answers.append(await gateway.pending.ask(item))

            tg.start_soon(ask)
            await until_pending(gateway.pending)
            url = f"{base}/console/approvals/{item.approval_id}"
            async with httpx2.AsyncClient() as intruder:
                page = await intruder.get(f"{base}/console/approvals")
                posted = await intruder.post(
                    url, data={"decision": "allow_once", "csrf": csrf_of(page.text)}
                )
                events = await intruder.get(f"{base}/console/events")
            still = [p.approval_id for p in gateway.pending.pending()]
            async with httpx2.AsyncClient() as operator:
                await operator_login(operator, base)
                mine = await operator.get(f"{base}/console/approvals")
                await operator.post(url, data={"decision": "deny", "csrf": csrf_of(mine.text)})
    assert page.status_code == 401
    assert item.approval_id not in page.text
    assert posted.status_code == 401
    assert events.status_code == 401
    assert still == [item.approval_id]  # never approved by the intruder
    assert answers == ["deny"]  # the operator's answer


async def test_the_login_url_logs_a_browser_in_and_drops_the_token_from_the_address() -> None:
    settings = GatewaySettings(transport="http", port=0)
    with anyio.fail_after(30):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            login = await http.get(f"{base}/console/?token={the_secret()}")
            runs = await http.get(f"{base}/console/runs")
    assert login.status_code == 303
    assert login.headers["location"] == "/console/runs"  # no token left in the address bar
    assert "sagents_console" in login.headers["set-cookie"]
    assert the_secret() not in login.headers["set-cookie"]
    assert runs.status_code == 200
    assert "operator" in runs.text


async def test_a_wrong_login_url_or_bearer_token_is_refused() -> None:
    settings = GatewaySettings(transport="http", port=0)
    with anyio.fail_after(30):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            url = await http.get(f"{base}/console/?token=not-the-secret")
            after = await http.get(f"{base}/console/runs")
            bearer = await http.get(
                f"{base}/console/runs", headers={"Authorization": "Bearer not-the-secret"}
            )
    assert url.status_code == 401
    assert "not valid" in url.text
    assert after.status_code == 401
    assert bearer.status_code == 401


async def test_a_machine_uses_the_secret_as_a_bearer_token_without_a_cookie_or_csrf() -> None:
    settings = GatewaySettings(transport="http", port=0)
    answers: list[str] = []
    headers = {"Authorization": f"Bearer {the_secret()}"}
    with anyio.fail_after(30):
        async with console_server(settings) as (base, gateway), anyio.create_task_group() as tg:
            item = PendingApproval.for_request(call("fleet__reboot", session_id="s1"), owner="")

            async def ask() -> None:
                answers.append(await gateway.pending.ask(item))

            tg.start_soon(ask)
            await until_pending(gateway.pending)
            async with httpx2.AsyncClient(headers=headers) as machine:
                listed = await machine.get(f"{base}/console/approvals")
                answered = await machine.post(
                    f"{base}/console/approvals/{item.approval_id}", data={"decision": "deny"}
                )
    assert listed.status_code == 200
    assert item.approval_id in listed.text
    assert "set-cookie" not in listed.headers  # a machine gets no browser session
    assert answered.status_code == 303
    assert answers == ["deny"]


async def test_the_gateway_token_still_makes_the_operator_beside_the_secret() -> None:
    settings = GatewaySettings(transport="http", port=0, bearer_token="static-operator-token")
    with anyio.fail_after(30):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            by_token = await http.get(
                f"{base}/console/runs", headers={"Authorization": "Bearer static-operator-token"}
            )
            by_secret = await http.get(
                f"{base}/console/runs", headers={"Authorization": f"Bearer {the_secret()}"}
            )
    assert by_token.status_code == 200
    assert by_secret.status_code == 200


def test_the_secret_is_kept_0600_and_every_process_on_the_data_dir_reads_the_same(
    tmp_path: Path,
) -> None:
    first = OperatorSecret.load_or_create(tmp_path / "data")
    second = OperatorSecret.load_or_create(tmp_path / "data")
    path = tmp_path / "data" / OPERATOR_SECRET_FILE
    assert first == second
    assert len(first.value) >= 43  # 256 random bits, URL-safe base64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first.value not in repr(first)
    assert OperatorSecret.load_or_create(tmp_path / "other") != first
    assert first.login_url("http://127.0.0.1:8765/console/") == (
        f"http://127.0.0.1:8765/console/?token={first.value}"
    )
    assert list((tmp_path / "data").iterdir()) == [path]  # no temporary file left behind


@pytest.mark.parametrize("kind", ["readable", "symlink", "garbage", "empty"])
def test_an_unsafe_or_malformed_secret_file_is_a_clear_config_error(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / OPERATOR_SECRET_FILE
    if kind == "symlink":
        (tmp_path / "elsewhere").write_text("x" * 43)
        os.chmod(tmp_path / "elsewhere", 0o600)
        path.symlink_to(tmp_path / "elsewhere")
    else:
        path.write_text({"readable": "a" * 43, "garbage": "not a secret!", "empty": ""}[kind])
        os.chmod(path, 0o644 if kind == "readable" else 0o600)
    with pytest.raises(ConfigError) as raised:
        OperatorSecret.load_or_create(tmp_path)
    assert str(path) in str(raised.value)
    assert "remove the file" in (raised.value.hint or "")


def test_a_data_dir_that_cannot_hold_the_secret_is_a_clear_config_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError) as raised:
        OperatorSecret.load_or_create(tmp_path / "a-file" / "data")
    assert "cannot make the operator secret" in str(raised.value)
    assert "SAGENTS_DATA_DIR" in (raised.value.hint or "")


def test_failed_logins_are_limited_per_client_and_regained_over_time() -> None:
    now = [0.0]
    limiter = LoginLimiter(burst=3, refill_s=10.0, clock=lambda: now[0])
    for _ in range(3):
        limiter.check("10.0.0.1")
        limiter.failed("10.0.0.1")
    with pytest.raises(TooManyLogins) as raised:
        limiter.check("10.0.0.1")
    limiter.check("10.0.0.2")  # another client is not held back
    assert 0 < raised.value.retry_after_s <= 10.0
    now[0] = 10.0
    limiter.check("10.0.0.1")  # one attempt regained


async def test_too_many_failed_logins_are_refused_even_with_the_right_token() -> None:
    settings = GatewaySettings(transport="http", port=0)
    with anyio.fail_after(60):
        async with console_server(settings) as (base, _), httpx2.AsyncClient() as http:
            wrong = [
                (await http.get(f"{base}/console/?token=guess{n}")).status_code
                for n in range(LOGIN_BURST)
            ]
            limited = await http.get(f"{base}/console/?token={the_secret()}")
            page = await http.get(f"{base}/console/login")
            form = await http.post(
                f"{base}/console/login", data={"csrf": csrf_of(page.text), "token": the_secret()}
            )
    assert wrong == [401] * LOGIN_BURST
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1
    assert "too many failed logins" in limited.text
    assert form.status_code == 429


async def test_logout_ends_an_open_event_stream_before_it_delivers_more() -> None:
    settings = GatewaySettings(transport="http", port=0)
    received: list[str] = []
    with anyio.fail_after(60):
        async with console_server(settings) as (base, gateway), httpx2.AsyncClient() as http:
            await operator_login(http, base)
            page = await http.get(f"{base}/console/approvals")
            async with http.stream("GET", f"{base}/console/events") as events:
                lines = events.aiter_lines()
                async for line in lines:
                    if line.startswith("data:"):
                        received.append(line)
                        break
                out = await http.post(f"{base}/console/logout", data={"csrf": csrf_of(page.text)})
                item = PendingApproval.for_request(call("later", session_id="s2"), owner="")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(gateway.pending.ask, item)  # a later event for the stream
                    await until_pending(gateway.pending)
                    async for line in lines:  # ends: the stream is closed, not idle
                        if line.startswith("data:"):
                            received.append(line)
                    gateway.pending.answer(item.approval_id, "deny", by=None)
            again = await http.get(f"{base}/console/events")
    assert out.status_code == 303
    assert [json.loads(r.removeprefix("data:"))["type"] for r in received] == ["approvals.state"]
    assert again.status_code == 401


def test_one_principals_logins_never_log_another_principal_out() -> None:
    auth = ConsoleAuth()
    operator = auth.new_session(Principal(operator=True, identity="op"))
    mallory = [auth.new_session(Principal(operator=False, identity="mallory"))
               for _ in range(2 * MAX_SESSIONS)]  # fmt: skip
    assert auth.session(operator.sid) is operator
    assert not operator.closed
    assert auth.session(mallory[-1].sid) is mallory[-1]
    assert mallory[0].closed  # mallory's own oldest went


async def test_an_evicted_console_session_loses_its_streams_and_its_access() -> None:
    live = LiveRuns()
    auth = ConsoleAuth(on_close=live.close_streams)
    first = auth.new_session(Principal(operator=True, identity="op"))
    with anyio.fail_after(10):
        async with live.subscribe(key=first.sid, principal="op") as updates:
            for n in range(MAX_SESSIONS):  # evicts the first
                auth.new_session(Principal(operator=True, identity=f"op-{n}"))
            live.broadcast("s1", {"type": "approvals.changed"})
            with pytest.raises(anyio.EndOfStream):
                await updates.receive()
    assert first.closed
    assert auth.session(first.sid) is None


async def test_open_event_streams_are_capped_per_principal() -> None:
    live = LiveRuns()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            opened = anyio.Event()
            release = anyio.Event()
            count = [0]

            async def hold(principal: str) -> None:
                async with live.subscribe(key="k", principal=principal):
                    count[0] += 1
                    if count[0] == MAX_STREAMS_PER_PRINCIPAL:
                        opened.set()
                    await release.wait()

            for _ in range(MAX_STREAMS_PER_PRINCIPAL):
                tg.start_soon(hold, "alice")
            await opened.wait()
            with pytest.raises(TooManyStreams):
                async with live.subscribe(key="k", principal="alice"):
                    pass
            async with live.subscribe(key="k", principal="bob"):
                assert live.streams_of("bob") == 1
            release.set()
    assert live.streams_of("alice") == 0


def test_a_fair_map_evicts_an_owners_own_oldest_and_then_the_biggest_owners() -> None:
    fair: FairMap[str, int] = FairMap(limit=5, per_owner=3)
    for n in range(4):
        fair.put(f"m{n}", n, "mallory")
    assert [k for k in fair] == ["m1", "m2", "m3"]  # over its cap: mallory's own oldest went
    fair.put("a0", 0, "alice")
    fair.put("a1", 1, "alice")
    fair.put("b0", 0, "bob")  # full: the owner holding the most (mallory) gives one up
    assert [k for k in fair] == ["m2", "m3", "a0", "a1", "b0"]
    assert fair.count_of("mallory") == 2
    assert fair.pop("a0") == 0
    assert fair.get("a0") is None
    assert len(fair) == 4


def test_one_principals_runs_never_push_another_principals_live_output_out() -> None:
    from sagents.core.events import ToolProgressEvent

    owners = {"victim-session": "alice"}
    live = LiveRuns(owner_of=lambda session_id: owners.get(session_id, "mallory"))
    live.offer("victim-session", ToolProgressEvent(tool_call_id="victim", text="mine\n", ts=0.0))
    for n in range(10 * MAX_CALLS):
        live.offer("flood", ToolProgressEvent(tool_call_id=f"flood-{n}", text="x", ts=0.0))
    assert live.text_of("victim") == {"stdout": "mine\n"}
    assert live.text_of(f"flood-{10 * MAX_CALLS - 1}") == {"stdout": "x"}
    assert live.text_of("flood-0") == {}  # the flood's own oldest went


async def test_the_console_refuses_more_waiting_approvals_of_one_principal() -> None:
    pending = PendingApprovals()
    items = [PendingApproval.for_request(call(f"t{n}"), owner="mallory")
             for n in range(MAX_PENDING_PER_PRINCIPAL)]  # fmt: skip
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for item in items:
                tg.start_soon(pending.ask, item)
            while len(pending.pending()) < MAX_PENDING_PER_PRINCIPAL:
                await pending.changed()
            extra = PendingApproval.for_request(call("one-more"), owner="mallory")
            assert await pending.ask(extra) == "deny"  # at once, not after the timeout
            other = PendingApproval.for_request(call("alice's"), owner="alice")
            tg.start_soon(pending.ask, other)
            while other.approval_id not in {p.approval_id for p in pending.pending()}:
                await pending.changed()
            for item in [*items, other]:
                pending.answer(item.approval_id, "deny", by=None)
    assert extra.approval_id not in {p.approval_id for p in pending.pending()}

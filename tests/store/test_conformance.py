"""One conformance suite for every store: the embedded one (SQLite files, approvals in memory)
and PostgreSQL (a real server started by the test setup, tests/postgres_server.py)."""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psycopg
import pytest

from sagents.audit._store import AuditEntry
from sagents.audit._tasks import RESULT_CHARS
from sagents.store import GatewayStore, open_store, parse_store_url
from sagents.store._embedded import call_digest
from sagents.store._held import HeldApproval

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[GatewayStore]:
    url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    async with open_store(parse_store_url(url), data_dir=tmp_path) as opened:
        yield opened


def _entry(n: int, kind: str = "gateway_call") -> AuditEntry:
    return AuditEntry(
        kind=kind,  # type: ignore[arg-type]  # the test's own kinds are valid AuditKinds
        ts=float(n),
        tool="run_script",
        status="ok",
        session_id=f"s{n}",
        data={"n": n, "text": "é"},
    )


async def test_audit_entries_come_back_latest_first_filtered_and_limited(
    store: GatewayStore,
) -> None:
    for n in range(5):
        await store.audit.record(_entry(n, "memory_write" if n == 2 else "gateway_call"))
    latest = await store.audit.entries(limit=3)
    calls = await store.audit.entries(kind="gateway_call")
    assert [e.data["n"] for e in latest] == [4, 3, 2]
    assert [e.data["n"] for e in calls] == [4, 3, 1, 0]
    assert calls[0] == _entry(4)


async def test_a_task_is_stored_running_then_with_its_result_cut_to_the_limit(
    store: GatewayStore,
) -> None:
    await store.tasks.started("t1", owner="token:a:", tool="run_script", started_at=10.0)
    running = await store.tasks.get("t1")
    await store.tasks.finished("t1", status="ok", result="x" * (RESULT_CHARS + 5), is_error=False)
    done = await store.tasks.get("t1")
    assert running is not None
    assert (running.status, running.owner, running.result) == ("running", "token:a:", None)
    assert done is not None
    assert (done.status, done.is_error, len(done.result or "")) == ("ok", False, RESULT_CHARS)
    assert done.finished_at is not None
    assert await store.tasks.get("missing") is None


async def test_a_task_the_gateway_ended_keeps_its_reason(store: GatewayStore) -> None:
    await store.tasks.started("t1", owner="o", tool="run_script", started_at=1.0)
    await store.tasks.started("t2", owner="o", tool="run_script", started_at=2.0)
    await store.tasks.finished(
        "t1", status="cancelled", result="c", is_error=True, reason="gateway stopped"
    )
    await store.tasks.finished("t2", status="cancelled", result="c", is_error=True)
    stopped, cancelled = await store.tasks.get("t1"), await store.tasks.get("t2")
    assert stopped is not None
    assert cancelled is not None
    assert (stopped.status, stopped.reason) == ("cancelled", "gateway stopped")
    assert (cancelled.status, cancelled.reason) == ("cancelled", None)


async def test_tasks_are_listed_for_their_owner_only_oldest_first(store: GatewayStore) -> None:
    await store.tasks.started("late", owner="o", tool="a", started_at=2.0)
    await store.tasks.started("early", owner="o", tool="b", started_at=1.0)
    await store.tasks.started("other", owner="p", tool="c", started_at=0.5)
    await store.tasks.started("nobody", owner="", tool="d", started_at=0.1)
    assert [t.task_id for t in await store.tasks.owned("o")] == ["early", "late"]
    assert await store.tasks.owned("") == []


async def test_tasks_of_a_gone_process_are_failed_and_announced_once(store: GatewayStore) -> None:
    await store.tasks.started("t1", owner="o", tool="run_script", started_at=1.0)
    if store.shared:  # a replica is gone when its lease ran out: simulate one that never beat
        await _reassign(store, "t1", "ghost-replica")
    failed = await store.tasks.mark_interrupted("gone")
    first = await store.tasks.take_unannounced("o")
    again = await store.tasks.take_unannounced("o")
    assert [(t.task_id, t.status, t.reason) for t in failed] == [("t1", "failed", "gone")]
    assert [t.task_id for t in first] == ["t1"]
    assert again == []
    assert await store.tasks.take_unannounced("") == []


async def test_a_terminal_status_is_written_once(store: GatewayStore) -> None:
    """A sweep that ended a call (its process seemed gone) is not contradicted later by that
    process, slow but alive, writing its own end."""
    await store.tasks.started("t1", owner="o", tool="run_script", started_at=1.0)
    if store.shared:
        await _reassign(store, "t1", "ghost-replica")
    await store.tasks.mark_interrupted("gone")
    late = await store.tasks.finished("t1", status="ok", result="done", is_error=False)
    await store.tasks.started("t2", owner="o", tool="run_script", started_at=2.0)
    first = await store.tasks.finished("t2", status="ok", result="done", is_error=False)
    second = await store.tasks.finished("t2", status="cancelled", result="", is_error=True)
    stored = {t.task_id: t for t in await store.tasks.owned("o")}
    assert (late, first, second) == (False, True, False)
    assert (stored["t1"].status, stored["t1"].reason, stored["t1"].result) == (
        "failed",
        "gone",
        None,
    )
    assert (stored["t2"].status, stored["t2"].result) == ("ok", "done")


async def test_a_pending_approval_is_redeemed_once_for_its_session_and_call(
    store: GatewayStore,
) -> None:
    approvals = store.approvals
    state = await approvals.issue("s1", "fleet__configure", {"sn": "A"})
    assert not await approvals.redeem(state, "s2", "fleet__configure", {"sn": "A"})
    assert not await approvals.redeem(state, "s1", "fleet__configure", {"sn": "B"})
    assert not await approvals.redeem("not json", "s1", "fleet__configure", {"sn": "A"})
    assert not await approvals.redeem(None, "s1", "fleet__configure", {"sn": "A"})
    assert await approvals.redeem(state, "s1", "fleet__configure", {"sn": "A"})
    assert not await approvals.redeem(state, "s1", "fleet__configure", {"sn": "A"})


async def _pending_calls(
    store: GatewayStore, request: pytest.FixtureRequest, tmp_path: Path
) -> list[str]:
    """The ``call`` column of the pending approvals, as whoever reads the store sees it."""
    if store.shared:
        url = request.getfixturevalue("postgres_url")
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
            cursor = await db.execute("SELECT call FROM sagents_pending_approvals")
            return [str(row[0]) for row in await cursor.fetchall()]
    with sqlite3.connect(tmp_path / "approvals.sqlite3") as db:
        return [str(row[0]) for row in db.execute("SELECT call FROM pending_approvals")]


async def test_a_pending_approvals_row_cannot_confirm_a_guess_of_its_arguments(
    store: GatewayStore, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The row binds the nonce to its call with a digest keyed like a held approval's (an
    HMAC with the gateway's approval key): a bare hash would let whoever reads the store test
    guesses of an argument (a secret) offline."""
    arguments = {"sn": "A", "token": "s3cr3t-0123456789"}
    state = await store.approvals.issue("s1", "fleet__configure", arguments)
    stored = await _pending_calls(store, request, tmp_path)
    assert store.secret is not None
    key = hashlib.sha256(b"approval" + store.secret).digest()
    plain = call_digest("fleet__configure", arguments)
    assert stored != [plain]
    assert stored == [hmac.new(key, plain.encode(), hashlib.sha256).hexdigest()]
    assert await store.approvals.redeem(state, "s1", "fleet__configure", arguments)


async def test_session_grants_are_kept_per_session(store: GatewayStore) -> None:
    await store.approvals.grant("s1", "fleet__configure")
    await store.approvals.grant("s1", "fleet__configure")
    await store.approvals.grant("s1", "fleet__reboot")
    assert await store.approvals.granted("s1") == {"fleet__configure", "fleet__reboot"}
    assert await store.approvals.granted("s2") == frozenset()


async def test_concurrent_audit_writers_lose_no_row(store: GatewayStore) -> None:
    async def writer(w: int) -> None:
        for n in range(25):
            await store.audit.record(_entry(w * 1000 + n))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for w in range(8):
                tg.start_soon(writer, w)
    rows = await store.audit.entries(limit=1000)
    assert sorted(e.data["n"] for e in rows) == sorted(
        w * 1000 + n for w in range(8) for n in range(25)
    )


async def _reassign(store: GatewayStore, task_id: str, replica_id: str) -> None:
    from sagents.store._postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    async with store._pool.connection() as db:  # the test plays a replica that died
        await db.execute(
            "UPDATE sagents_tasks SET replica_id = %s WHERE task_id = %s", (replica_id, task_id)
        )


async def test_a_tool_definition_is_pinned_on_first_sight_and_a_change_is_held_until_accepted(
    store: GatewayStore,
) -> None:
    first = await store.pins.observe("fleet", {"get": '{"d":1}', "set": '{"d":2}'})
    same = await store.pins.observe("fleet", {"get": '{"d":1}'})
    changed = await store.pins.observe("fleet", {"get": '{"d":1,"x":true}'})
    listed = await store.pins.changes()
    accepted = await store.pins.accept("fleet", "get")
    after = await store.pins.observe("fleet", {"get": '{"d":1,"x":true}'})
    assert [first["get"].changed, same["get"].changed] == [False, False]
    assert (changed["get"].definition, changed["get"].offered) == ('{"d":1}', '{"d":1,"x":true}')
    assert changed["get"].digest != changed["get"].offered_digest
    assert [(p.server, p.tool) for p in listed] == [("fleet", "get")]
    assert [(p.tool, p.definition, p.changed) for p in accepted] == [
        ("get", '{"d":1,"x":true}', False)
    ]
    assert not after["get"].changed
    assert await store.pins.changes() == []


async def test_a_reverted_change_is_forgotten_and_accept_takes_every_tool_of_a_server(
    store: GatewayStore,
) -> None:
    await store.pins.observe("a", {"t1": "1", "t2": "2"})
    await store.pins.observe("b", {"t1": "1"})
    await store.pins.observe("a", {"t1": "1x", "t2": "2x"})
    await store.pins.observe("b", {"t1": "1x"})
    reverted = await store.pins.observe("b", {"t1": "1"})
    accepted = await store.pins.accept("a")
    assert not reverted["t1"].changed
    assert [(p.tool, p.definition) for p in accepted] == [("t1", "1x"), ("t2", "2x")]
    assert await store.pins.accept("a") == []
    assert await store.pins.accept("nobody", "t") == []
    assert await store.pins.changes() == []


# -- the agent loop's paused runs and sessions ------------------------------------------------


async def test_a_paused_run_is_kept_replaced_and_loaded_by_id(store: GatewayStore) -> None:
    await store.agents.save_state("r1", "s1", '{"v": 1}')
    await store.agents.save_state("r1", "s1", '{"v": 2, "text": "é"}')
    assert await store.agents.load_state("r1") == '{"v": 2, "text": "é"}'
    assert await store.agents.load_state("missing") is None


async def test_a_paused_run_is_claimed_exactly_once_by_racing_claims(store: GatewayStore) -> None:
    await store.agents.save_state("r1", "s1", "{}")
    wins: list[bool] = []

    async def claim() -> None:
        wins.append(await store.agents.claim_state("r1"))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(claim)
    assert sorted(wins) == [False] * 7 + [True]
    assert await store.agents.claim_state("r1") is False
    assert await store.agents.claim_state("r2") is True


async def test_sessions_are_kept_by_id_and_the_last_saved_is_known(store: GatewayStore) -> None:
    assert await store.agents.last_session() is None
    await store.agents.save_session("a", '{"n": 1}')
    await store.agents.save_session("b", '{"n": 2}')
    await store.agents.save_session("a", '{"n": 3}')
    assert await store.agents.load_session("a") == '{"n": 3}'
    assert await store.agents.load_session("b") == '{"n": 2}'
    assert await store.agents.load_session("c") is None
    assert await store.agents.last_session() == "a"


async def test_upstream_logins_are_kept_per_server_and_principal_and_resealed_at_once(
    store: GatewayStore,
) -> None:
    await store.logins.save("gh", "", b"operator")
    await store.logins.save("gh", "alice", b"one")
    await store.logins.save("gh", "alice", b"two")  # replaced
    await store.logins.save("jira", "alice", b"three")
    kept = [(row.server, row.principal, row.sealed) for row in await store.logins.logins()]
    assert kept == [("gh", "", b"operator"), ("gh", "alice", b"two"), ("jira", "alice", b"three")]
    assert await store.logins.load("gh", "alice") == b"two"
    assert await store.logins.load("gh", "bob") is None

    def refuse(sealed: bytes) -> bytes:
        if sealed == b"three":
            raise ValueError("cannot open")
        return sealed.upper()

    with pytest.raises(ValueError, match="cannot open"):
        await store.logins.reseal(refuse)
    assert await store.logins.load("gh", "alice") == b"two"  # all or nothing
    assert await store.logins.reseal(bytes.upper) == 3
    assert await store.logins.load("jira", "alice") == b"THREE"
    assert await store.logins.delete("gh", "alice") is True
    assert await store.logins.delete("gh", "alice") is False
    assert await store.logins.load("gh", "alice") is None


async def test_the_last_session_may_be_asked_for_among_ids_with_a_prefix(
    store: GatewayStore,
) -> None:
    await store.agents.save_session("chat-1", "{}")
    await store.agents.save_session("web-1", "{}")
    assert await store.agents.last_session(prefix="chat-") == "chat-1"
    assert await store.agents.last_session(prefix="web-") == "web-1"
    assert await store.agents.last_session(prefix="cha%") is None  # a prefix, not a pattern
    assert await store.agents.last_session(prefix="none-") is None


async def test_a_sessions_pending_state_is_its_last_paused_run_not_resumed_yet(
    store: GatewayStore,
) -> None:
    assert await store.agents.pending_state("s1") is None
    await store.agents.save_state("r1", "s1", "{}")
    await store.agents.save_state("r2", "s1", "{}")
    await store.agents.save_state("r3", "s2", "{}")
    assert await store.agents.pending_state("s1") == "r2"
    assert await store.agents.claim_state("r2")
    assert await store.agents.pending_state("s1") == "r1"
    assert await store.agents.claim_state("r1")
    assert await store.agents.pending_state("s1") is None
    assert await store.agents.pending_state("s2") == "r3"


async def test_the_builtin_memory_and_todo_tools_keep_their_state_as_the_store_says(
    store: GatewayStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sagents.config._loader import SagentsConfig
    from sagents.gateway._runtime import _memory_and_todo
    from sagents.tool import SessionContext, ToolManager
    from sagents.tool.impl import register_builtin_tools

    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    stores = _memory_and_todo(SagentsConfig(), store)
    manager = ToolManager()
    register_builtin_tools(
        manager,
        None,
        names=["memory_store", "memory_search", "todo_write", "todo_read"],
        **stores,
    )
    alice = SessionContext(session_id="s1", user_id="alice")
    kept = await manager.run_tool("memory_store", {"content": "tea, no sugar"}, alice)
    found = await manager.run_tool("memory_search", {"query": "sugar"}, alice)
    await manager.run_tool("todo_write", {"items": [{"id": "a", "content": "brew"}]}, alice)
    listed = await manager.run_tool("todo_read", {}, alice)
    assert not kept.is_error, kept.text
    assert [m["content"] for m in found.structured["memories"]] == ["tea, no sugar"]
    assert [item["id"] for item in listed.structured["items"]] == ["a"]
    on_files = (tmp_path / "data" / "memory.sqlite3").exists()
    assert on_files == (store.memory is None)  # the store's backend, or the tools' own file
    if store.memory is not None:  # the change's audit row is kept with it, in the store
        assert len(await store.audit.entries(kind="memory_write")) == 1


def _held(approval_id: str, *, binding: str = "b1", asked_at: float = 0.0) -> HeldApproval:
    now = time.time()
    return HeldApproval(
        approval_id=approval_id,
        binding=binding,
        call=call_digest("fleet__configure", {"sn": "A"}),
        card=json.dumps({"id": approval_id}),
        asker="local/boot-1",
        asked_at=now + asked_at,
        expires_at=now + 600 + asked_at,
    )


async def test_a_held_approval_is_answered_once_and_taken_once_by_its_binding_and_call(
    store: GatewayStore,
) -> None:
    approvals = store.approvals
    await approvals.hold(_held("h1"))
    await approvals.hold(_held("h2", binding="", asked_at=1.0))  # nothing can send it again
    await approvals.hold(_held("gone", asked_at=-1200.0))  # expired: never listed
    listed = await approvals.held()
    first = await approvals.settle("h1", "allow_once")
    second = await approvals.settle("h1", "deny")
    unknown = await approvals.settle("nope", "deny")
    other_call = await approvals.take("b1", call_digest("fleet__configure", {"sn": "B"}))
    other_binding = await approvals.take("b2", call_digest("fleet__configure", {"sn": "A"}))
    await approvals.settle("h2", "allow_once")
    no_binding = await approvals.take("", call_digest("fleet__configure", {"sn": "A"}))
    taken = await approvals.take("b1", call_digest("fleet__configure", {"sn": "A"}))
    again = await approvals.take("b1", call_digest("fleet__configure", {"sn": "A"}))
    await approvals.release("h2")
    assert [h.approval_id for h in listed] == ["h1", "h2"]
    assert (listed[0].card, listed[0].binding, listed[0].asker) == (
        '{"id": "h1"}',
        "b1",
        "local/boot-1",
    )
    assert listed[0].answer is None
    assert (first, second, unknown) == (True, False, False)
    assert (other_call, other_binding, no_binding) == (None, None, None)
    assert (taken, again) == ("allow_once", None)
    assert await approvals.held() == []


async def test_two_answers_of_one_held_approval_racing_record_exactly_one(
    store: GatewayStore,
) -> None:
    await store.approvals.hold(_held("h1"))
    results: list[bool] = []

    async def settle(answer: str) -> None:
        results.append(await store.approvals.settle("h1", answer))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for answer in ("allow_once", "deny", "allow_once", "deny"):
                tg.start_soon(settle, answer)
    assert sorted(results) == [False, False, False, True]

"""memory_* and todo_* in process: scopes, dedup, ranking, limits, audit; one list per session
shared by its agents, persisted across a restart, change events; on the SQLite files and on the
PostgreSQL store of replicas alike."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.audit import SqliteAuditStore
from sagents.core.events import ToolProgressEvent
from sagents.progress import ProgressHub
from sagents.store import AuditLog, parse_store_url
from sagents.store._postgres import PostgresStore
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import MemoryLimits, MemoryStore, TodoStore, register_builtin_tools
from tests.audit.test_store_faults import exclusive_lock
from tests.postgres_server import PostgresServer
from tests.tool.impl import conformance_memory_todo as checks

pytestmark = pytest.mark.anyio

MEMORY = ["memory_store", "memory_search", "memory_delete"]
TODO = ["todo_write", "todo_read"]


@dataclass
class Backing:
    """Where the tools' stores live: SQLite files in ``tmp_path``, or a PostgreSQL store."""

    tmp_path: Path
    store: PostgresStore | None = None

    @property
    def audit(self) -> AuditLog:
        if self.store is not None:
            return self.store.audit
        return SqliteAuditStore(path=self.tmp_path / "audit.sqlite3")

    def manager(self, limits: MemoryLimits | None = None) -> ToolManager:
        memory = MemoryStore(
            path=self.tmp_path / "memory.sqlite3",
            audit=self.audit,
            limits=limits or MemoryLimits(),
        )
        todo = TodoStore(path=self.tmp_path / "todo.sqlite3")
        if self.store is not None:  # the store's own backends (GatewayStore.memory, .todos)
            memory.backend = self.store.memory
            todo.backend = self.store.todos
        manager = ToolManager()
        register_builtin_tools(manager, None, names=[*MEMORY, *TODO], memory=memory, todo=todo)
        return manager


@pytest.fixture(params=["sqlite", "postgresql"])
async def backing(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backing]:
    """Each test once on the SQLite files and once on PostgreSQL (docs/scale-out.md)."""
    if request.param == "sqlite":
        yield Backing(tmp_path)
        return
    url = request.getfixturevalue("postgres_url")
    async with PostgresStore(parse_store_url(url)) as store:
        yield Backing(tmp_path, store)


def _caller(manager: ToolManager, *, wait_s: float = 20) -> checks.Call:
    async def call(tool: str, arguments: dict[str, Any], context: Any) -> tuple[Any, str | None]:
        with anyio.fail_after(wait_s):
            result = await manager.run_tool(tool, arguments, context)
        return result.structured, (result.error.code if result.error else None)

    return call


def _user(user: str, agent: str | None = None, session: str = "s1") -> SessionContext:
    return SessionContext(user_id=user, agent=agent, session_id=session)


async def test_fts_ranks_the_relevant_memory_first(backing: Backing) -> None:
    await checks.check_fts_ranks_the_relevant_memory_first(
        _caller(backing.manager()), _user("alice")
    )


async def test_dedup_within_a_scope(backing: Backing) -> None:
    await checks.check_dedup_within_a_scope(_caller(backing.manager()), _user("alice"))


async def test_user_a_never_finds_user_b_memories(backing: Backing) -> None:
    await checks.check_users_never_see_each_other(
        _caller(backing.manager()), _user("alice"), _user("bob")
    )


async def test_delete(backing: Backing) -> None:
    await checks.check_delete(_caller(backing.manager()), _user("alice"))


async def test_agent_scopes_are_separate_and_user_scope_is_shared(backing: Backing) -> None:
    call = _caller(backing.manager())
    planner, coder = _user("alice", "planner"), _user("alice", "coder")
    own, _ = await call("memory_store", {"content": "plan uses three phases"}, planner)
    mine, _ = await call("memory_store", {"content": "plan uses three phases"}, coder)
    assert mine["duplicate"] is False  # no dedup across agents either
    assert mine["memory"]["id"] != own["memory"]["id"]
    await call("memory_store", {"content": "alice works in UTC+2", "scope": "user"}, planner)
    found, _ = await call("memory_search", {"query": "phases UTC"}, coder)
    assert {m["content"] for m in found["memories"]} == {
        "plan uses three phases",
        "alice works in UTC+2",
    }
    assert mine["memory"]["id"] in {m["id"] for m in found["memories"]}
    assert own["memory"]["id"] not in {m["id"] for m in found["memories"]}


async def test_memory_limits_are_enforced(backing: Backing) -> None:
    call = _caller(backing.manager(MemoryLimits(max_chars=50, max_per_scope=2, max_tags=2)))
    me = _user("alice")
    _, code = await call("memory_store", {"content": "x" * 51}, me)
    assert code == "quota_exceeded"
    _, code = await call("memory_store", {"content": "one", "tags": ["a", "b", "c"]}, me)
    assert code == "quota_exceeded"
    for text in ("one", "two"):
        _, code = await call("memory_store", {"content": text}, me)
        assert code is None
    _, code = await call("memory_store", {"content": "three"}, me)
    assert code == "quota_exceeded"
    _, code = await call("memory_store", {"content": "three"}, _user("bob"))
    assert code is None  # the limit is per scope


async def test_memory_needs_a_user(backing: Backing) -> None:
    _, code = await _caller(backing.manager())("memory_store", {"content": "x"}, SessionContext())
    assert code == "not_allowed"


async def test_search_filters_by_tags(backing: Backing) -> None:
    call = _caller(backing.manager())
    me = _user("alice")
    await call("memory_store", {"content": "tea in the morning", "tags": ["drink"]}, me)
    await call("memory_store", {"content": "tea ceremony history", "tags": ["culture"]}, me)
    found, _ = await call("memory_search", {"query": "tea", "tags": ["culture"]}, me)
    assert [m["content"] for m in found["memories"]] == ["tea ceremony history"]


async def test_writes_and_deletes_are_audited(backing: Backing) -> None:
    call = _caller(backing.manager())
    stored, _ = await call("memory_store", {"content": "audited"}, _user("alice", session="s9"))
    await call("memory_delete", {"id": stored["memory"]["id"]}, _user("alice", session="s9"))
    entries = await backing.audit.entries()
    assert [(e.kind, e.session_id) for e in entries] == [
        ("memory_delete", "s9"),
        ("memory_write", "s9"),
    ]
    assert entries[1].data["memory_id"] == stored["memory"]["id"]
    assert entries[1].data["user_id"] == "alice"
    assert "audited" not in json.dumps(dict(entries[1].data))  # the content stays private


async def test_todo_cycles_and_unknown_ids_are_refused(backing: Backing) -> None:
    await checks.check_todo_cycles_and_unknown_ids_are_refused(
        _caller(backing.manager()), _user("alice")
    )


async def test_todo_update_changes_only_given_fields(backing: Backing) -> None:
    await checks.check_todo_update_changes_only_given_fields(
        _caller(backing.manager()), _user("alice")
    )


async def test_two_agents_of_one_session_share_one_list_and_others_see_nothing(
    backing: Backing,
) -> None:
    call = _caller(backing.manager())
    lead = SessionContext(session_id="s1", agent="lead")
    helper = SessionContext(session_id="s1", agent="helper")
    await call("todo_write", {"items": [{"id": "a", "content": "plan"}]}, lead)
    await call(
        "todo_write", {"items": [{"id": "b", "content": "code", "blocked_by": ["a"]}]}, helper
    )
    listed, _ = await call("todo_read", {}, lead)
    assert [(i["id"], i["owner"]) for i in listed["items"]] == [("a", "lead"), ("b", "helper")]
    other, _ = await call("todo_read", {}, SessionContext(session_id="s2", agent="lead"))
    assert other["items"] == []


async def test_the_todo_list_survives_a_restart(backing: Backing) -> None:
    session = SessionContext(session_id="s1")
    await _caller(backing.manager())(
        "todo_write",
        {"items": [{"id": "a", "content": "persist me", "status": "in_progress"}]},
        session,
    )
    listed, _ = await _caller(backing.manager())("todo_read", {}, session)
    assert listed["items"] == [
        {
            "id": "a",
            "content": "persist me",
            "status": "in_progress",
            "owner": None,
            "blocked_by": [],
        }
    ]


async def test_a_todo_change_is_a_tool_progress_event(tmp_path: Path) -> None:
    hub = ProgressHub()
    manager = ToolManager(progress_hub=hub)
    register_builtin_tools(
        manager, None, names=TODO, todo=TodoStore(path=tmp_path / "todo.sqlite3")
    )
    texts: list[str] = []
    async with hub.subscribe("s1") as queue:

        async def run() -> None:
            result = await manager.run_tool(
                "todo_write",
                {"items": [{"id": "a", "content": "show me"}]},
                SessionContext(session_id="s1", agent="lead"),
                tool_call_id="c1",
            )
            assert not result.is_error

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(20):
                while True:
                    event = await queue.receive()
                    assert isinstance(event, ToolProgressEvent)
                    assert event.tool_call_id == "c1"
                    if event.closed:
                        break
                    texts.append(event.text)
    payload = json.loads("".join(texts))
    assert payload["type"] == "todo.changed"
    assert payload["agent"] == "lead"
    assert payload["items"][0]["content"] == "show me"


async def test_concurrent_updates_of_two_agents_lose_nothing(backing: Backing) -> None:
    call = _caller(backing.manager())
    agents = [SessionContext(session_id="s1", agent=name) for name in ("lead", "helper")]

    async def add(number: int) -> None:
        item = {"id": f"i{number}", "content": f"task {number}"}
        _, code = await call("todo_write", {"items": [item]}, agents[number % 2])
        assert code is None

    async with anyio.create_task_group() as tg:
        for number in range(20):
            tg.start_soon(add, number)
    listed, _ = await call("todo_read", {}, agents[0])
    assert sorted(i["id"] for i in listed["items"]) == sorted(f"i{n}" for n in range(20))
    owners = {i["id"]: i["owner"] for i in listed["items"]}
    assert owners["i0"] == "lead"
    assert owners["i1"] == "helper"


async def test_concurrent_stores_of_one_text_make_one_memory(backing: Backing) -> None:
    call = _caller(backing.manager())
    ids: list[str] = []

    async def store() -> None:
        stored, code = await call("memory_store", {"content": "same fact"}, _user("alice"))
        assert code is None
        ids.append(stored["memory"]["id"])

    async with anyio.create_task_group() as tg:
        for _ in range(12):
            tg.start_soon(store)
    assert len(ids) == 12
    assert len(set(ids)) == 1


BAD_NAMES = ["*", "", " ", " alice", "a*", "?", "%", "a%b", "[ab]", "a/b", "..", ".", "a\\b"]


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_an_agent_or_user_name_that_is_not_one_literal_name_is_refused(
    backing: Backing, name: str
) -> None:
    call = _caller(backing.manager())
    for context in (_user("alice", name), _user(name, "planner")):
        for tool, arguments in [
            ("memory_store", {"content": "the deploy key is in vault"}),
            ("memory_search", {"query": "deploy key"}),
            ("memory_delete", {"id": "m1"}),
        ]:
            with anyio.fail_after(20):
                result = await backing.manager().run_tool(tool, arguments, context)
            assert result.error is not None, (tool, name)
            assert result.error.code == "not_allowed"
            assert "refuses the" in result.error.message
            assert repr(name) in result.error.message
    found, _ = await call("memory_search", {"query": "deploy key"}, _user("alice", "coder"))
    assert found["memories"] == []  # nothing reached alice's user scope


async def test_an_agent_named_star_does_not_write_into_the_user_scope(backing: Backing) -> None:
    call = _caller(backing.manager())
    _, code = await call("memory_store", {"content": "planted by *"}, _user("alice", "*"))
    assert code == "not_allowed"
    found, _ = await call("memory_search", {"query": "planted"}, _user("alice", "coder"))
    assert found["memories"] == []
    _, code = await call("memory_store", {"content": "plain agent"}, _user("alice", "x.y-z_1"))
    assert code is None


async def test_cjk_queries_of_one_two_and_more_characters(backing: Backing) -> None:
    await checks.check_cjk_queries_of_one_two_and_more_characters(
        _caller(backing.manager()), _user("alice")
    )


# A write either has its audit row or is not answered ok (docs/builtin_tools.md, "Memory"):
# the audit refuses the row (another process holds the SQLite audit file's lock; a trigger
# refuses the PostgreSQL insert), so the write is answered with the store's error and not kept.

REFUSE_AUDIT = """
CREATE FUNCTION sagents_test_refuse() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION 'the audit refuses rows'; END $$ LANGUAGE plpgsql;
CREATE TRIGGER sagents_test_refuse BEFORE INSERT ON sagents_audit
FOR EACH ROW EXECUTE FUNCTION sagents_test_refuse();
"""


@asynccontextmanager
async def audit_refused(backing: Backing) -> AsyncIterator[None]:
    if backing.store is None:
        path = backing.tmp_path / "audit.sqlite3"
        SqliteAuditStore(path=path).check()  # its schema exists: only the lock is missing
        with exclusive_lock(path):
            yield
        return
    async with backing.store.pool.connection() as db:
        await db.execute(REFUSE_AUDIT.encode())  # the test's own constant SQL
    try:
        yield
    finally:
        async with backing.store.pool.connection() as db:
            await db.execute(b"DROP TRIGGER sagents_test_refuse ON sagents_audit")


async def test_a_memory_write_whose_audit_row_is_refused_is_not_answered_ok_nor_kept(
    backing: Backing,
) -> None:
    call = _caller(backing.manager(), wait_s=60)
    me = _user("alice", session="s9")
    kept, _ = await call("memory_store", {"content": "kept before"}, me)
    async with audit_refused(backing):
        stored, stored_code = await call("memory_store", {"content": "never audited"}, me)
        deleted, deleted_code = await call("memory_delete", {"id": kept["memory"]["id"]}, me)
    found, _ = await call("memory_search", {"query": "audited kept"}, me)
    entries = await backing.audit.entries()
    assert stored is None
    assert stored_code in ("store_unavailable", "store_error")
    assert deleted is None
    assert deleted_code in ("store_unavailable", "store_error")
    assert [m["content"] for m in found["memories"]] == ["kept before"]  # neither write kept
    assert [(e.kind, e.data["memory_id"]) for e in entries] == [
        ("memory_write", kept["memory"]["id"])
    ]


async def test_memory_and_todo_calls_while_the_database_is_down_are_store_unavailable(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    me = _user("alice", session="s9")
    async with PostgresStore(parse_store_url(own_postgres.url())) as store:
        call = _caller(Backing(tmp_path, store).manager(), wait_s=60)
        await call("memory_store", {"content": "before the outage"}, me)
        await anyio.to_thread.run_sync(own_postgres.stop)
        codes = [
            (await call(tool, arguments, me))[1]
            for tool, arguments in (
                ("memory_store", {"content": "during the outage"}),
                ("memory_search", {"query": "outage"}),
                ("todo_write", {"items": [{"id": "a", "content": "x"}]}),
                ("todo_read", {}),
            )
        ]
        await anyio.to_thread.run_sync(own_postgres.start)
        found, _ = await call("memory_search", {"query": "outage"}, me)
        entries = await store.audit.entries()
    assert codes == ["store_unavailable"] * 4
    assert [m["content"] for m in found["memories"]] == ["before the outage"]
    assert [e.kind for e in entries] == ["memory_write"]

"""What only the shared PostgreSQL store does: replicas see one another's approvals, cancel
requests and deaths; the schema is versioned; a bad address fails clearly; an outage of the
database (a real server stopped and started) is a state, not a crash; a replica that was only
slow gives way to the sweep that took its lease."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import anyio
import psycopg
import pytest

from sagents.audit._store import AuditEntry
from sagents.errors import StoreSchemaError, StoreUnavailableError
from sagents.store import parse_store_url
from sagents.store._embedded import call_digest
from sagents.store._held import HeldApproval
from sagents.store._migrations import SCHEMA_VERSION
from sagents.store._postgres import LEASE_REASON, PostgresStore
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def replica(url: str, name: str, *, lease_s: float = 15.0) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(parse_store_url(url, lease_s=lease_s), replica_id=name) as store:
        yield store


async def _sql(url: str, query: str, *params: object) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
        cursor = await db.execute(query.encode(), params)  # the test's own constant SQL
        return await cursor.fetchall() if cursor.description else []


async def test_an_approval_asked_on_one_replica_is_redeemed_once_on_either(
    postgres_url: str,
) -> None:
    async with replica(postgres_url, "a") as a, replica(postgres_url, "b") as b:
        state = await a.approvals.issue("s", "fleet__configure", {"sn": "A"})
        results: list[bool] = []

        async def redeem(store: PostgresStore) -> None:
            results.append(
                await store.approvals.redeem(state, "s", "fleet__configure", {"sn": "A"})
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for store in (a, b, a, b):
                    tg.start_soon(redeem, store)
        assert a.secret == b.secret
    assert sorted(results) == [False, False, False, True]


async def test_a_cancel_request_reaches_the_replica_that_runs_the_task(postgres_url: str) -> None:
    asked = anyio.Event()
    received: list[str] = []

    async def on_cancel(task_id: str) -> None:
        received.append(task_id)
        asked.set()

    async with replica(postgres_url, "a") as a, replica(postgres_url, "b") as b:
        a.tasks.on_cancel(on_cancel)
        with anyio.fail_after(20):
            assert await b.tasks.request_cancel("task-1") is True
            await asked.wait()
    assert received == ["task-1"]


async def test_an_answer_recorded_through_one_replica_is_heard_by_the_others_once(
    postgres_url: str,
) -> None:
    """``settle`` on replica B tells every replica (``NOTIFY``) the card's id once it is
    recorded; an answer that records nothing (a second one) tells nobody."""
    heard: list[str] = []
    told = anyio.Event()

    async def on_settled(approval_id: str) -> None:
        heard.append(approval_id)
        told.set()

    now = time.time()
    held = HeldApproval(
        approval_id="h1", binding="b1", call="c1", card="{}", asker="gone/boot",
        asked_at=now, expires_at=now + 600,
    )  # fmt: skip
    async with replica(postgres_url, "a") as a, replica(postgres_url, "b") as b:
        a.approvals.on_settled(on_settled)
        await b.approvals.hold(held)
        with anyio.fail_after(20):
            assert await b.approvals.settle("h1", "allow_once")
            await told.wait()
            told = anyio.Event()
            assert not await b.approvals.settle("h1", "deny")
            await b.approvals.hold(replace(held, approval_id="h2"))
            assert await b.approvals.settle("h2", "deny")  # told in order: h2 after h1
            await told.wait()
    assert heard == ["h1", "h2"]


async def test_running_tasks_of_a_replica_whose_lease_ran_out_are_failed_by_another(
    postgres_url: str,
) -> None:
    async with replica(postgres_url, "b") as b:
        await _sql(
            postgres_url,
            "INSERT INTO sagents_replicas (replica_id, host, heartbeat_at, lease_s) VALUES "
            "('dead', 'h', now() - interval '1 hour', 15), ('alive', 'h', now(), 15)",
        )
        for task_id, owner in (("of-dead", "dead"), ("of-alive", "alive"), ("of-b", "b")):
            await b.tasks.started(task_id, owner="o", tool="run_script", started_at=1.0)
            await _sql(
                postgres_url,
                "UPDATE sagents_tasks SET replica_id = %s WHERE task_id = %s",
                owner,
                task_id,
            )
        failed = await b.sweep()
        statuses = {t.task_id: t.status for t in await b.tasks.owned("o")}
        replicas = await _sql(postgres_url, "SELECT replica_id FROM sagents_replicas ORDER BY 1")
    assert [(t.task_id, t.reason) for t in failed] == [("of-dead", LEASE_REASON)]
    assert statuses == {"of-dead": "failed", "of-alive": "running", "of-b": "running"}
    assert replicas == [("alive",), ("b",)]


async def test_a_replica_that_stops_cleanly_leaves_the_replica_table(postgres_url: str) -> None:
    async with replica(postgres_url, "a"):
        inside = await _sql(postgres_url, "SELECT replica_id FROM sagents_replicas")
    after = await _sql(postgres_url, "SELECT replica_id FROM sagents_replicas")
    assert inside == [("a",)]
    assert after == []


async def test_migrations_run_once_and_a_newer_schema_is_refused(postgres_url: str) -> None:
    async with replica(postgres_url, "a"):
        pass
    async with replica(postgres_url, "a"):
        pass
    versions = await _sql(postgres_url, "SELECT version FROM sagents_schema")
    await _sql(postgres_url, "UPDATE sagents_schema SET version = %s", SCHEMA_VERSION + 1)
    with pytest.raises(StoreSchemaError) as caught:
        async with replica(postgres_url, "a"):
            pass
    assert versions == [(SCHEMA_VERSION,)]
    assert caught.value.details["found"] == SCHEMA_VERSION + 1
    assert "upgrade sagents" in str(caught.value)


async def test_a_refused_connection_is_a_clear_error_without_the_password(
    postgres: PostgresServer,
) -> None:
    url = postgres.url().replace(f":{postgres.port}/", ":1/").replace("sagents@", "sagents:pw@")
    with pytest.raises(StoreUnavailableError) as caught:
        async with replica(url, "a"):
            pass
    message = str(caught.value)
    assert "cannot reach the store postgresql://sagents:***@127.0.0.1:1/postgres" in message
    assert "pw" not in message.replace("pg_hba", "")


async def test_serve_puts_the_builtin_memory_todo_and_audit_on_the_shared_store(
    postgres_url: str,
) -> None:
    from sagents.gateway._runtime import _memory_and_todo, plan_gateway
    from sagents.gateway._settings import GatewaySettings
    from sagents.store._postgres_state import PostgresMemory, PostgresTodos

    plan = plan_gateway(GatewaySettings(store=postgres_url))
    embedded = _memory_and_todo(plan.config, None)
    async with replica(postgres_url, "a") as store:
        shared = _memory_and_todo(plan.config, store)
    assert plan.store_location.kind == "postgresql"
    assert embedded["memory"].backend is None
    assert "todo" not in embedded  # the built-in default: SQLite files
    assert isinstance(shared["memory"].backend, PostgresMemory)
    assert shared["memory"].audit is store.audit
    assert isinstance(shared["todo"].backend, PostgresTodos)


# Outages of a real server (pg_ctl stop -m immediate, then start): a state, not a crash.

ENTRY = AuditEntry(kind="gateway_call", ts=1.0, tool="run_script", status="ok")


async def test_a_fast_restart_of_an_idle_database_hands_out_no_stale_connection(
    own_postgres: PostgresServer,
) -> None:
    url = own_postgres.url()
    async with replica(url, "a") as store:
        await store.audit.record(ENTRY)  # the pool now holds an open connection
        await anyio.to_thread.run_sync(own_postgres.stop)
        await anyio.to_thread.run_sync(own_postgres.start)
        with anyio.fail_after(60):
            await store.audit.record(ENTRY)
            entries = await store.audit.entries()
    assert len(entries) == 2


async def test_during_an_outage_calls_are_store_unavailable_and_after_it_everything_serves_again(
    own_postgres: PostgresServer,
) -> None:
    url = own_postgres.url()
    cancelled: list[str] = []
    heard = anyio.Event()

    async def on_cancel(task_id: str) -> None:
        cancelled.append(task_id)
        heard.set()

    async with replica(url, "a", lease_s=1.5) as a:
        a.tasks.on_cancel(on_cancel)
        await a.audit.record(ENTRY)
        await anyio.to_thread.run_sync(own_postgres.stop)
        with anyio.fail_after(60):
            with pytest.raises(StoreUnavailableError) as during:
                await a.audit.record(ENTRY)
            with pytest.raises(StoreUnavailableError):  # known down: checked, still down
                await a.audit.ensure_reachable()
        await anyio.to_thread.run_sync(own_postgres.start)
        with anyio.fail_after(60):
            await a.audit.ensure_reachable()
            await a.audit.record(ENTRY)
            # the heartbeats go on: the replica's row is beaten again after the restart
            await _sql(url, "UPDATE sagents_replicas SET heartbeat_at = now() - interval '1 h'")
            while not await _sql(  # noqa: ASYNC110  # another process's row: polled
                url,
                "SELECT 1 FROM sagents_replicas WHERE replica_id = 'a' "
                "AND heartbeat_at > now() - interval '1 minute'",
            ):
                await anyio.sleep(0.1)
            # the cancel listener is back: a request from another replica reaches this one
            async with replica(url, "b") as b:
                while not heard.is_set():
                    await b.tasks.request_cancel("task-1")
                    with anyio.move_on_after(1):
                        await heard.wait()
        entries = await a.audit.entries()
    assert "cannot reach the store" in str(during.value)
    assert len(entries) == 2
    assert cancelled[0] == "task-1"


async def test_a_slow_replica_whose_lease_was_taken_stops_the_call_as_the_sweep_said(
    postgres_url: str,
) -> None:
    stopped = anyio.Event()
    stops: list[str] = []

    async def on_cancel(task_id: str) -> None:
        stops.append(task_id)
        stopped.set()

    async with (
        replica(postgres_url, "slow", lease_s=0.9) as slow,
        replica(postgres_url, "sweeper") as sweeper,
    ):
        slow.tasks.on_cancel(on_cancel)
        await slow.tasks.started("t1", owner="o", tool="run_script", started_at=1.0)
        with anyio.fail_after(60):
            swept: list[str] = []
            while not swept:  # the slow replica's lease runs out (it may beat in between)
                await _sql(
                    postgres_url,
                    "UPDATE sagents_replicas SET heartbeat_at = now() - interval '1 hour' "
                    "WHERE replica_id = 'slow'",
                )
                swept = [task.task_id for task in await sweeper.sweep()]
            await stopped.wait()  # its next beat finds the call taken and stops it
        written = await slow.tasks.finished("t1", status="cancelled", result="", is_error=True)
        stored = await sweeper.tasks.get("t1")
    assert swept == ["t1"]
    assert stops[0] == "t1"
    assert written is False
    assert stored is not None
    assert (stored.status, stored.reason) == ("failed", LEASE_REASON)


async def test_pending_state_of_a_session_is_found_through_its_index(postgres_url: str) -> None:
    """``pending_state`` looks a session's paused runs up by ``sagents_run_states.session_id``
    (migration 6): the planner, told not to scan the whole table, uses the index, and a
    database at version 5 with paused runs in it gets the index when a replica enters."""
    async with replica(postgres_url, "a") as store:
        await store.agents.save_state("st-1", "sess-1", "{}")
    # the database as version 5 left it: without what migrations 6 and 7 add
    await _sql(postgres_url, "DROP INDEX IF EXISTS sagents_run_states_session")
    await _sql(postgres_url, "DROP TABLE IF EXISTS sagents_held_approvals")
    await _sql(postgres_url, "UPDATE sagents_schema SET version = 5")
    async with replica(postgres_url, "a") as store:
        await store.agents.save_state("st-2", "sess-1", "{}")
        found = await store.agents.pending_state("sess-1")
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as db:
        await db.execute("SET enable_seqscan = off")
        cursor = await db.execute(
            "EXPLAIN SELECT s.state_id FROM sagents_run_states s WHERE s.session_id = 'sess-1' "
            "AND NOT EXISTS (SELECT 1 FROM sagents_run_claims c WHERE c.state_id = s.state_id) "
            "ORDER BY s.saved DESC LIMIT 1"
        )
        plan = " ".join(str(row[0]) for row in await cursor.fetchall())
    assert found == "st-2"
    assert "sagents_run_states_session" in plan, plan
    assert await _sql(postgres_url, "SELECT version FROM sagents_schema") == [(SCHEMA_VERSION,)]


async def test_migration_8_removes_the_bare_digests_of_pending_approvals_a_version_7_database_holds(
    postgres_url: str,
) -> None:
    """Before migration 8 a pending approval's row held a bare SHA-256 of tool and arguments
    (whoever reads the table could test guesses of an argument); the rows written so are
    removed (each approval is asked again) and the ones written now are keyed."""
    async with replica(postgres_url, "a"):
        pass
    bare = call_digest("t", {"token": "s3cr3t"})
    await _sql(
        postgres_url,
        "INSERT INTO sagents_pending_approvals (nonce, session_id, call, expires_at) "
        "VALUES ('n1', 's1', %s, now() + interval '10 minutes')",
        bare,
    )
    await _sql(postgres_url, "UPDATE sagents_schema SET version = 7")
    async with replica(postgres_url, "a") as store:
        spent = await store.approvals.redeem('{"nonce": "n1"}', "s1", "t", {"token": "s3cr3t"})
        await store.approvals.issue("s1", "t", {"token": "s3cr3t"})
    calls = await _sql(postgres_url, "SELECT call FROM sagents_pending_approvals")
    assert spent is False
    assert len(calls) == 1
    assert (bare,) not in calls
    assert await _sql(postgres_url, "SELECT version FROM sagents_schema") == [(SCHEMA_VERSION,)]

"""What only the shared PostgreSQL store does: replicas see one another's approvals, cancel
requests and deaths; the schema is versioned; a bad address fails clearly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import psycopg
import pytest

from sagents.errors import StoreSchemaError, StoreUnavailableError
from sagents.store import parse_store_url
from sagents.store._migrations import SCHEMA_VERSION
from sagents.store._postgres import LEASE_REASON, PostgresStore
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def replica(url: str, name: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(parse_store_url(url), replica_id=name) as store:
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
    from sagents.tool.impl._postgres import PostgresMemory, PostgresTodos

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

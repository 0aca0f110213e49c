"""A replica that was only slow, not dead, on a real PostgreSQL: the sweep of another replica
marked its background call ``failed``; the slow replica stops the call and shows it as the
sweep said, never overwriting that status (docs/scale-out.md, "When the database is down")."""

from __future__ import annotations

import anyio
import psycopg
import pytest

from sagents.core._result import ToolResult
from sagents.gateway._tasks import GatewayTasks, TaskScope
from sagents.store import parse_store_url
from sagents.store._postgres import LEASE_REASON, PostgresStore
from sagents.tool._background import TaskInfo

pytestmark = pytest.mark.anyio


async def test_a_call_whose_lease_was_taken_is_stopped_and_shown_as_the_sweep_said(
    postgres_url: str,
) -> None:
    stopped = anyio.Event()

    async def call() -> ToolResult:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    ended = anyio.Event()
    scope = TaskScope(session_id="s", owner="o")
    slow_location = parse_store_url(postgres_url, lease_s=0.9)
    async with (
        PostgresStore(slow_location, replica_id="slow") as slow,
        PostgresStore(parse_store_url(postgres_url), replica_id="sweeper") as sweeper,
        GatewayTasks(slow.tasks) as tasks,
    ):

        async def on_done(info: TaskInfo) -> None:
            await tasks.finished(info)
            ended.set()

        task_id = await tasks.start("s", "run_script", call)
        assert await tasks.wait(task_id, hand_off_after=0.0, on_done=on_done) is None
        assert await tasks.handed_off(scope, task_id, "run_script") is None
        with anyio.fail_after(60):
            while not await sweeper.sweep():  # the slow replica's lease runs out
                async with await psycopg.AsyncConnection.connect(
                    postgres_url, autocommit=True
                ) as db:
                    await db.execute(
                        "UPDATE sagents_replicas SET heartbeat_at = now() - interval '1 hour' "
                        "WHERE replica_id = 'slow'"
                    )
            await stopped.wait()  # its next beat found the call taken: stopped
            await ended.wait()  # and its end was offered to the store
        shown = await tasks.view(scope, task_id)
        listed = await tasks.tool(scope, "script_status", {})
        stored = await sweeper.tasks.get(task_id)
    assert (shown["status"], shown["reason"]) == ("failed", LEASE_REASON)
    assert listed.structured is not None
    assert [(t["id"], t["status"]) for t in listed.structured["tasks"]] == [(task_id, "failed")]
    assert stored is not None
    assert (stored.status, stored.reason) == ("failed", LEASE_REASON)

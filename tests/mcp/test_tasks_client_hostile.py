"""TasksClient against hostile upstreams: a task that never ends, garbage status, the state of
another task; giving up on a task always reaches the upstream as tasks/cancel."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from sagents.errors import UpstreamProtocolError
from sagents.mcp._ext_types import CreateTaskResult, TaskIdParams
from sagents.mcp._tasks_client import TasksClient, call_tool_or_task

pytestmark = pytest.mark.anyio

NOW = "2026-12-01T00:00:00Z"


def upstream(state: Callable[[str], dict[str, Any]], seen: Counter[str]) -> Server[Any]:
    async def call(
        ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> CreateTaskResult:
        return CreateTaskResult(
            task_id="t1",
            status="working",
            created_at=NOW,
            last_updated_at=NOW,
            ttl_ms=1000,
            poll_interval_ms=1,
        )

    server: Server[Any] = Server("tasks", on_call_tool=call)  # type: ignore[arg-type]  # a task result

    async def get(ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> Any:
        seen["tasks/get"] += 1
        return _Raw(**state(params.task_id))

    async def cancel(ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> mt.EmptyResult:
        seen["tasks/cancel"] += 1
        return mt.EmptyResult()

    server.add_request_handler("tasks/get", TaskIdParams, get)
    server.add_request_handler("tasks/cancel", TaskIdParams, cancel)
    return server


class _Raw(mt.Result):
    """Any answer, as the upstream writes it."""

    model_config = mt.Result.model_config | {"extra": "allow"}


def base(task_id: str, status: str) -> dict[str, Any]:
    return {
        "taskId": task_id,
        "status": status,
        "createdAt": NOW,
        "lastUpdatedAt": NOW,
        "ttlMs": 1000,
        "pollIntervalMs": 1,
        "resultType": "complete",
    }


async def refused(server: Server[Any]) -> UpstreamProtocolError:
    async with Client(server, mode="auto", extensions=[TasksClient()]) as client:
        with anyio.fail_after(10), pytest.raises(UpstreamProtocolError) as raised:
            await call_tool_or_task(client.session, "job", {})
    return raised.value


async def test_the_state_of_another_task_is_refused_and_the_task_cancelled() -> None:
    seen: Counter[str] = Counter()

    def other(task_id: str) -> dict[str, Any]:
        done = base("t2", "completed")
        return {**done, "result": {"content": [{"type": "text", "text": "not yours"}]}}

    error = await refused(upstream(other, seen))
    assert "'t2'" in error.message
    assert seen["tasks/cancel"] == 1


async def test_a_garbage_status_is_refused_and_the_task_cancelled() -> None:
    seen: Counter[str] = Counter()
    error = await refused(upstream(lambda task_id: base(task_id, "exploded"), seen))
    assert "tasks/get" in error.message
    assert seen["tasks/cancel"] == 1


async def test_a_completed_task_with_a_garbage_result_is_refused() -> None:
    seen: Counter[str] = Counter()

    def garbage(task_id: str) -> dict[str, Any]:
        return {**base(task_id, "completed"), "result": {"content": "not a list"}}

    error = await refused(upstream(garbage, seen))
    assert "result" in error.message


async def test_giving_up_on_a_task_that_never_ends_cancels_it_upstream() -> None:
    seen: Counter[str] = Counter()
    server = upstream(lambda task_id: base(task_id, "working"), seen)
    async with Client(server, mode="auto", extensions=[TasksClient()]) as client:
        with anyio.move_on_after(10) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(call_tool_or_task, client.session, "job", {})
                while seen["tasks/get"] < 3:
                    await anyio.lowlevel.checkpoint()
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught
    assert seen["tasks/cancel"] == 1

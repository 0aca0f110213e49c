"""An upstream's ``notifications/tasks`` consumed instead of polls: a server whose ``tasks/get``
never says more than ``working`` still finishes the call when it notifies the end; another
task's notifications and invalid ones are dropped; a server without notifications is polled."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY

from sagents.mcp._ext_types import CreateTaskResult, TaskIdParams
from sagents.mcp._tasks_client import TasksClient, TaskStatuses, call_tool_or_task
from tests.mcp.test_tasks_client_hostile import NOW, _Raw, base

pytestmark = pytest.mark.anyio


class _RawParams(mt.NotificationParams):
    """Any params, as the upstream writes them."""

    model_config = mt.NotificationParams.model_config | {"extra": "allow"}


class _RawNote(mt.Notification[_RawParams, str]):
    method: str = "notifications/tasks"
    params: _RawParams


def notifying(
    seen: Counter[str], notes: list[dict[str, Any]], *, polled: anyio.Event | None = None
) -> Server[Any]:
    """Tasks that ``tasks/get`` always reports ``working``; a listen stream naming them gets
    ``notes`` (then stays open). ``polled`` is set at the third ``tasks/get``."""

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

    async def listen(
        ctx: ServerRequestContext[Any, Any], params: mt.SubscriptionsListenRequestParams
    ) -> mt.SubscriptionsListenResult:
        seen["subscriptions/listen"] += 1
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        task_ids = (params.notifications.model_extra or {}).get("taskIds")
        await ctx.session.send_notification(
            mt.SubscriptionsAcknowledgedNotification(
                params=mt.SubscriptionsAcknowledgedNotificationParams(
                    notifications=mt.SubscriptionFilter(taskIds=task_ids), _meta=meta
                )
            ),
            related_request_id=ctx.request_id,
        )
        for note in notes:
            params_ = _RawParams.model_validate({**note, "_meta": meta})
            await ctx.session.send_notification(
                _RawNote(params=params_),  # type: ignore[arg-type]  # an extension's, as written
                related_request_id=ctx.request_id,
            )
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    server: Server[Any] = Server(
        "notifying",
        on_call_tool=call,  # type: ignore[arg-type]  # a task result
        on_subscriptions_listen=listen,
    )

    async def get(ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> Any:
        seen["tasks/get"] += 1
        if polled is not None and seen["tasks/get"] >= 3:
            polled.set()
        return _Raw(**base(params.task_id, "working"))

    server.add_request_handler("tasks/get", TaskIdParams, get)
    return server


def done(task_id: str, text: str) -> dict[str, Any]:
    state = base(task_id, "completed")
    state.pop("resultType")
    return {**state, "result": {"content": [{"type": "text", "text": text}]}}


async def call(server: Server[Any]) -> mt.CallToolResult:
    statuses = TaskStatuses()
    async with Client(server, mode="auto", extensions=[TasksClient(statuses)]) as client:
        with anyio.fail_after(20):
            return await call_tool_or_task(client.session, "job", {}, statuses=statuses)


async def test_a_notified_end_finishes_the_call_that_polls_never_would() -> None:
    seen: Counter[str] = Counter()
    result = await call(notifying(seen, [done("t1", "from the notification")]))
    assert isinstance(result.content[0], mt.TextContent)
    assert result.content[0].text == "from the notification"
    assert seen["subscriptions/listen"] == 1


async def test_another_tasks_and_invalid_notifications_are_dropped() -> None:
    seen: Counter[str] = Counter()
    notes = [
        done("t2", "not yours"),
        {**done("t1", "garbage"), "status": "exploded"},
        done("t1", "yours"),
    ]
    result = await call(notifying(seen, notes))
    assert isinstance(result.content[0], mt.TextContent)
    assert result.content[0].text == "yours"


async def test_without_notifications_the_task_is_polled() -> None:
    seen: Counter[str] = Counter()
    polled = anyio.Event()
    server = notifying(seen, [], polled=polled)
    statuses = TaskStatuses()
    async with Client(server, mode="auto", extensions=[TasksClient(statuses)]) as client:
        with anyio.move_on_after(20) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    functools.partial(call_tool_or_task, statuses=statuses),
                    client.session,
                    "job",
                    {},
                )
                await polled.wait()  # polled at the server's interval meanwhile
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught

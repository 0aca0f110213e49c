"""``notifications/tasks`` (the Tasks extension's status notifications) on the gateway's
``subscriptions/listen`` streams: only to a stream of the task's owner that names it, each
status change, the whole task state."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import Client
from mcp.client.extension import NotificationBinding
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from sagents.gateway import Gateway, Profile
from sagents.gateway._settings import GatewaySettings
from sagents.mcp._ext_types import TaskStatusNotificationParams
from sagents.mcp._tasks_client import TasksClient
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_ext_tasks import FakeScripts, until
from tests.gateway.test_ext_tasks_break import _start, _update
from tests.gateway.test_http import http_gateway

pytestmark = pytest.mark.anyio


class Watching(TasksClient):
    """The Tasks extension, plus a binding that collects ``notifications/tasks``."""

    def __init__(self) -> None:
        self.send: MemoryObjectSendStream[TaskStatusNotificationParams]
        self.send, self.states = anyio.create_memory_object_stream[TaskStatusNotificationParams](
            100
        )
        self.acks: list[mt.SubscriptionFilter] = []
        self.acked = anyio.Event()

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return (
            NotificationBinding(
                method="notifications/tasks",
                params_type=TaskStatusNotificationParams,
                handler=self.send.send,
            ),
        )

    async def message_handler(self, message: IncomingMessage) -> None:
        if isinstance(message, mt.SubscriptionsAcknowledgedNotification):
            self.acks.append(message.params.notifications)
            self.acked.set()


def watching_client(target: Any, watch: Watching, **kwargs: Any) -> Client:
    return Client(target, extensions=[watch], message_handler=watch.message_handler, **kwargs)


@asynccontextmanager
async def listening(
    client: Client, watch: Watching, task_ids: list[str]
) -> AsyncIterator[mt.SubscriptionFilter]:
    """A ``subscriptions/listen`` stream naming ``task_ids``; yields the acknowledged filter."""
    request = mt.SubscriptionsListenRequest(
        params=mt.SubscriptionsListenRequestParams(
            notifications=mt.SubscriptionFilter(taskIds=task_ids)
        )
    )
    watch.acked = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.session.send_request, request, mt.SubscriptionsListenResult)
        await watch.acked.wait()
        yield watch.acks[-1]
        tg.cancel_scope.cancel()


async def next_state(states: MemoryObjectReceiveStream[TaskStatusNotificationParams]) -> Any:
    return await states.receive()


async def test_the_owner_hears_each_status_change_of_its_task() -> None:
    scripts = FakeScripts()
    watch = Watching()

    async def elicit(context: Any, params: Any) -> mt.ElicitResult:
        raise AssertionError("asked through the task only")

    with anyio.fail_after(20):
        async with (
            Gateway(FakeProvider(), mode="auto", scripts=scripts) as gateway,
            watching_client(gateway.server, watch, elicitation_callback=elicit) as client,
        ):
            task_id = await _start(client, RUN_SCRIPT_TOOL_NAME)
            asking = await until(client, task_id, "input_required")
            assert asking.input_requests is not None
            [key] = asking.input_requests
            async with listening(client, watch, [task_id, "unknown-task"]) as honored:
                assert honored.model_extra == {"taskIds": [task_id]}
                heard = await next_state(watch.states)  # its state when the stream opened
                assert heard.status == "input_required"
                assert heard.task_id == task_id
                assert heard.input_requests is not None
                assert list(heard.input_requests) == [key]
                answer = mt.ElicitResult(action="accept", content={"decision": "allow_once"})
                await _update(client, task_id, {key: answer})
                working = await next_state(watch.states)
                scripts.release.set()
                done = await next_state(watch.states)
    assert working.status == "working"
    assert done.status == "completed"
    assert done.result is not None
    assert done.result["content"][0]["text"] == "script done (allow_once)"


async def test_task_notifications_need_the_extension_declared() -> None:
    async with Gateway(FakeProvider(), mode="auto") as gateway, Client(gateway.server) as client:
        request = mt.SubscriptionsListenRequest(
            params=mt.SubscriptionsListenRequestParams(
                notifications=mt.SubscriptionFilter(taskIds=["x"])
            )
        )
        with anyio.fail_after(10), pytest.raises(MCPError) as refused:
            await client.session.send_request(request, mt.SubscriptionsListenResult)
    assert refused.value.error.code == -32021


async def test_another_token_cannot_listen_to_a_task(tmp_path: Path) -> None:
    ops = Profile(name="ops")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"ops-token": ops}
    )
    provider = FakeProvider()
    owner_watch, other_watch = Watching(), Watching()

    def http(url: str, token: str, watch: Watching) -> Client:
        headers = {"Authorization": f"Bearer {token}"}
        transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
        return watching_client(transport, watch, mode="auto")

    with anyio.fail_after(60):
        async with (
            http_gateway(
                provider, settings, token_profiles={"ops-token": ops}, background_after_s=0.01
            ) as url,
            http(url, "main-token", owner_watch) as owner,
            http(url, "ops-token", other_watch) as other,
        ):
            task_id = await _start(owner)
            async with (
                listening(other, other_watch, [task_id]) as foreign,
                listening(owner, owner_watch, [task_id]) as own,
            ):
                assert own.model_extra == {"taskIds": [task_id]}
                assert not (foreign.model_extra or {}).get("taskIds")
                assert (await next_state(owner_watch.states)).status == "working"
                provider.release.set()
                done = await next_state(owner_watch.states)
            assert other_watch.states.statistics().current_buffer_used == 0
    assert done.status == "completed"

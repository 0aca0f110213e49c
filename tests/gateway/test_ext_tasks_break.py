"""The Tasks extension attacked: other tokens, restarts, cancel races, many tasks at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from sagents.audit._tasks import SqliteTaskStore
from sagents.gateway import Gateway, Profile
from sagents.gateway._settings import GatewaySettings
from sagents.mcp._ext_types import (
    CancelTaskRequest,
    TaskIdParams,
    UpdateTaskRequest,
    UpdateTaskRequestParams,
)
from sagents.mcp._tasks_client import TasksClient
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_ext_tasks import FakeScripts, get, tasks_client, until
from tests.gateway.test_http import http_gateway

pytestmark = pytest.mark.anyio


def _http(url: str, token: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
    return Client(transport, mode="auto", extensions=[TasksClient()])


async def _start(client: Client, name: str = "fleet__slow") -> str:
    created = await client.session.call_tool(name, {}, allow_claimed=True)
    task_id = created.model_dump(by_alias=True).get("taskId")
    assert isinstance(task_id, str), created
    return task_id


async def _cancel(client: Client, task_id: str) -> None:
    cancel = CancelTaskRequest(params=TaskIdParams(task_id=task_id))
    await client.session.send_request(cancel, mt.EmptyResult)


async def _update(client: Client, task_id: str, responses: Any) -> None:
    params = UpdateTaskRequestParams(task_id=task_id, input_responses=responses)
    await client.session.send_request(UpdateTaskRequest(params=params), mt.EmptyResult)


async def _refused(call: Any) -> int:
    with pytest.raises(MCPError) as raised:
        await call
    return raised.value.error.code


async def test_another_token_cannot_poll_answer_or_cancel_a_task(tmp_path: Path) -> None:
    ops = Profile(name="ops")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"ops-token": ops}
    )
    store = SqliteTaskStore(tmp_path / "background.sqlite3")
    provider = FakeProvider()
    with anyio.fail_after(60):
        async with (
            http_gateway(
                provider,
                settings,
                token_profiles={"ops-token": ops},
                background_after_s=0.01,
                task_store=store,
            ) as url,
            _http(url, "main-token") as owner,
            _http(url, "ops-token") as other,
        ):
            task_id = await _start(owner)
            answer = {"k": mt.ElicitResult(action="cancel")}
            codes = [
                await _refused(get(other, task_id)),
                await _refused(_update(other, task_id, answer)),
                await _refused(_cancel(other, task_id)),
            ]
            assert not provider.cancelled.is_set()
            provider.release.set()  # it ends after the request that made it
            done = await until(owner, task_id, "completed")
            codes.append(await _refused(get(other, task_id)))  # finished: still not theirs
    assert codes == [-32602] * 4
    assert done.result is not None
    assert done.result["content"][0]["text"] == "slow done"


async def test_a_task_running_when_the_gateway_stops_reads_as_aborted_after_restart(
    tmp_path: Path,
) -> None:
    store = SqliteTaskStore(tmp_path / "background.sqlite3")
    provider = FakeProvider()
    with anyio.fail_after(30):
        async with (
            Gateway(provider, background_after_s=0.01, task_store=store) as gateway,
            tasks_client(gateway) as client,
        ):
            task_id = await _start(client)
            await provider.started.wait()
        async with (
            Gateway(FakeProvider(), task_store=store) as gateway,
            tasks_client(gateway) as client,
        ):
            state = await get(client, task_id)
    assert state.status == "failed", state
    assert state.status_message is not None
    assert "aborted" in state.status_message
    assert state.error is not None


async def test_cancelling_a_task_waiting_for_approval_twice_then_answering_it() -> None:
    scripts = FakeScripts()

    async def never(context: Any, params: Any) -> mt.ElicitResult:
        raise AssertionError("asked through tasks/get")

    async with (
        Gateway(FakeProvider(), mode="auto", scripts=scripts) as gateway,
        tasks_client(gateway, elicitation_callback=never) as client,
    ):
        with anyio.fail_after(20):
            task_id = await _start(client, RUN_SCRIPT_TOOL_NAME)
            asking = await until(client, task_id, "input_required")
            assert asking.input_requests is not None
            [key] = asking.input_requests
            await _cancel(client, task_id)
            await _cancel(client, task_id)  # a finished task: left as it is
            late = {key: mt.ElicitResult(action="accept", content={"decision": "allow_once"})}
            await _update(client, task_id, late)  # answered after the end: ignored
            wrong = await _refused(
                client.session.send_request(
                    _RawUpdate(params={"taskId": task_id, "inputResponses": ["x"]}),
                    mt.EmptyResult,
                )
            )
            state = await get(client, task_id)
    assert state.status == "cancelled"
    assert scripts.answers == []  # never approved
    assert wrong == -32602


class _RawUpdate(mt.Request[dict[str, Any], Any]):
    method: str = "tasks/update"
    params: dict[str, Any]
    name_param = "taskId"


async def test_fifty_concurrent_tasks_each_end_with_their_own_result() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.01) as gateway,
        tasks_client(gateway) as client,
    ):
        with anyio.fail_after(60):
            ids: list[str] = []

            async def one() -> None:
                ids.append(await _start(client))

            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(one)
            provider.release.set()
            states = [await until(client, task_id, "completed") for task_id in ids]
    assert len(set(ids)) == 50
    assert {s.task_id for s in states} == set(ids)


async def test_tasks_cancel_of_a_call_running_in_another_session_is_not_a_silent_no_op(
    tmp_path: Path,
) -> None:
    store = SqliteTaskStore(tmp_path / "background.sqlite3")
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.01, task_store=store) as gateway,
        Client(gateway.server, mode="legacy") as handshake,
        tasks_client(gateway) as client,
    ):
        with anyio.fail_after(20):
            handed = await handshake.call_tool("fleet__slow", {})
            assert handed.structured_content is not None
            task_id = handed.structured_content["task_id"]
            seen = await get(client, task_id)  # the same owner may see it
            code = await _refused(_cancel(client, task_id))
            provider.release.set()
    assert seen.status == "working"
    assert code == -32602
    assert not provider.cancelled.is_set()

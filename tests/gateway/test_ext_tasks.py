"""The MCP Tasks extension in the gateway: run_script and long calls become tasks for the
2026-07-28 clients that declare it; others keep script_status / script_cancel."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from sagents.audit._tasks import SqliteTaskStore
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.gateway import ClientScriptApprover, Gateway
from sagents.mcp._ext_types import (
    TASKS_EXTENSION,
    CancelTaskRequest,
    DetailedTaskResult,
    GetTaskRequest,
    TaskIdParams,
    UpdateTaskRequest,
    UpdateTaskRequestParams,
)
from sagents.mcp._tasks_client import TasksClient
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.tool._approval import ApprovalRequest
from sagents.tool._context import SessionContext
from tests.gateway.fakes import FakeProvider, _spec

pytestmark = pytest.mark.anyio


_REQUEST = ApprovalRequest.for_script(("fleet__configure",), "print('hi')", description="configure")


@dataclass
class FakeScripts:
    """A run_script host whose script asks run_script's one approval, then waits."""

    release: anyio.Event = field(default_factory=anyio.Event)
    cancelled: anyio.Event = field(default_factory=anyio.Event)
    answers: list[str] = field(default_factory=list)

    def spec(self, specs: list[ToolSpec], mode: Any) -> ToolSpec | None:
        return _spec(RUN_SCRIPT_TOOL_NAME, "read_only", server=None)

    async def run(
        self,
        arguments: dict[str, Any],
        context: SessionContext,
        *,
        tools: Any,
        tool_call_id: str | None,
    ) -> ToolResult:
        answer = await ClientScriptApprover().approve(_REQUEST)
        self.answers.append(answer)
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        return ToolResult.from_text(f"script done ({answer})")


def tasks_client(gateway: Gateway, **kwargs: Any) -> Client:
    return Client(gateway.server, extensions=[TasksClient()], **kwargs)


async def get(client: Client, task_id: str) -> DetailedTaskResult:
    request = GetTaskRequest(params=TaskIdParams(task_id=task_id))
    return await client.session.send_request(request, DetailedTaskResult)


async def until(client: Client, task_id: str, status: str) -> DetailedTaskResult:
    while True:
        state = await get(client, task_id)
        if state.status == status:
            return state
        await anyio.lowlevel.checkpoint()  # let the gateway run; the caller bounds the wait


async def elicit(context: Any, params: Any) -> mt.ElicitResult:
    raise AssertionError("a task asks through tasks/get, never by a request mid-call")


async def test_run_script_is_a_task_whose_approval_travels_on_tasks_update() -> None:
    scripts = FakeScripts()
    async with (
        Gateway(FakeProvider(), mode="auto", scripts=scripts) as gateway,
        tasks_client(gateway, elicitation_callback=elicit) as client,
    ):
        assert TASKS_EXTENSION in (client.server_capabilities.extensions or {})
        with anyio.fail_after(10):
            created = await client.session.call_tool(
                RUN_SCRIPT_TOOL_NAME, {"code": "x"}, allow_claimed=True
            )
            dumped = created.model_dump(by_alias=True, exclude_none=True)
            task_id = dumped.get("taskId")
            assert isinstance(task_id, str), dumped
            assert dumped["resultType"] == "task"
            assert dumped["status"] == "working"
            asking = await until(client, task_id, "input_required")
            assert asking.input_requests is not None
            [(key, request)] = asking.input_requests.items()
            assert isinstance(request, mt.ElicitRequest)
            answer = mt.ElicitResult(action="accept", content={"decision": "allow_once"})
            update = UpdateTaskRequest(
                params=UpdateTaskRequestParams(task_id=task_id, input_responses={key: answer})
            )
            await client.session.send_request(update, mt.EmptyResult)
            await until(client, task_id, "working")
            scripts.release.set()
            done = await until(client, task_id, "completed")
    assert scripts.answers == ["allow_once"]
    assert done.result is not None
    assert done.result["content"][0]["text"] == "script done (allow_once)"


async def test_tasks_cancel_ends_the_call_and_the_task_is_cancelled() -> None:
    scripts = FakeScripts()
    async with (
        Gateway(FakeProvider(), mode="auto", scripts=scripts) as gateway,
        tasks_client(gateway) as client,  # no elicitation: the approval is denied unasked
    ):
        with anyio.fail_after(10):
            created = await client.session.call_tool(
                RUN_SCRIPT_TOOL_NAME, {"code": "x"}, allow_claimed=True
            )
            task_id = created.model_dump(by_alias=True)["taskId"]
            await until(client, task_id, "working")
            cancel = CancelTaskRequest(params=TaskIdParams(task_id=task_id))
            await client.session.send_request(cancel, mt.EmptyResult)
            await scripts.cancelled.wait()
            state = await until(client, task_id, "cancelled")
    assert state.status == "cancelled"
    assert scripts.answers == ["deny"]


async def test_a_long_call_past_background_after_becomes_a_task_for_a_tasks_client() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.01) as gateway,
        tasks_client(gateway) as client,
    ):
        with anyio.fail_after(10):
            created = await client.session.call_tool("fleet__slow", {}, allow_claimed=True)
            task_id = created.model_dump(by_alias=True)["taskId"]
            provider.release.set()
            done = await until(client, task_id, "completed")
            quick = await client.call_tool("fleet__status", {"sn": "1"})
    assert done.result is not None
    assert done.result["content"][0]["text"] == "slow done"
    assert isinstance(quick, mt.CallToolResult)  # a quick call is answered directly


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_clients_without_tasks_keep_the_handed_off_text(era: str) -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.01) as gateway,
        Client(gateway.server, mode=era) as client,
    ):
        with anyio.fail_after(10):
            handed = await client.call_tool("fleet__slow", {})
            provider.release.set()
    assert isinstance(handed, mt.CallToolResult)
    assert handed.structured_content is not None
    assert handed.structured_content["status"] == "running"


async def test_tasks_get_refuses_an_unknown_or_foreign_task() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.01) as gateway,
        Client(gateway.server, mode="legacy") as owner,
        tasks_client(gateway) as other,
    ):
        with anyio.fail_after(10):
            handed = await owner.call_tool("fleet__slow", {})
            assert handed.structured_content is not None
            task_id = handed.structured_content["task_id"]
            for unknown in (task_id, "no-such-task"):
                with pytest.raises(MCPError) as raised:
                    await get(other, unknown)
                assert raised.value.error.code == -32602
            provider.release.set()


async def test_tasks_methods_need_the_2026_protocol() -> None:
    async with Gateway(FakeProvider()) as gateway, Client(gateway.server, mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await get(client, "any")
    assert raised.value.error.code == -32601


async def test_after_a_restart_a_task_is_failed_as_aborted(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "background.sqlite3")
    store.started("left-running", owner="local:", tool="run_script", started_at=time.time())
    async with (
        Gateway(FakeProvider(), task_store=store) as gateway,
        tasks_client(gateway) as client,
    ):
        with anyio.fail_after(10):
            state = await get(client, "left-running")
    assert state.status == "failed"
    assert state.status_message is not None
    assert "aborted" in state.status_message
    assert state.error is not None
    assert state.error["code"] == -32603


async def test_the_tasks_client_resolves_a_task_into_the_call_result() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.01) as gateway,
        tasks_client(gateway) as client,
    ):
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:

                async def release() -> None:
                    await provider.started.wait()
                    provider.release.set()

                tg.start_soon(release)
                result = await client.call_tool("fleet__slow", {})  # polls tasks/get
    assert isinstance(result, mt.CallToolResult)
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    assert block.text == "slow done"


async def test_tasks_methods_need_the_extension_declared() -> None:
    async with Gateway(FakeProvider()) as gateway, Client(gateway.server, mode="auto") as client:
        with pytest.raises(MCPError) as raised:
            await get(client, "any")
    assert raised.value.error.code == -32021
    assert raised.value.error.data == {
        "requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}
    }


class _RawUpdate(mt.Request[dict[str, Any], Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: dict[str, Any]
    name_param = "taskId"


async def test_tasks_update_ignores_responses_to_unknown_keys_whatever_they_hold() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.01) as gateway,
        tasks_client(gateway) as client,
    ):
        with anyio.fail_after(10):
            created = await client.session.call_tool("fleet__slow", {}, allow_claimed=True)
            task_id = created.model_dump(by_alias=True)["taskId"]
            junk = {"taskId": task_id, "inputResponses": {"unknown-key": {"ignored": True}}}
            ack = await client.session.send_request(_RawUpdate(params=junk), mt.EmptyResult)
            provider.release.set()
            await until(client, task_id, "completed")
    assert ack.result_type == "complete"

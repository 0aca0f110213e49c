"""Background calls: hand-off after ``background_after_s``, status, cancel, completion notice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client

from sagents.audit._tasks import SqliteTaskStore
from sagents.core._result import ToolResult
from sagents.errors import TaskNotFoundError
from sagents.gateway import BackgroundTasks, Gateway
from tests.gateway.fakes import FakeProvider
from tests.small_disk import fill_disk

pytestmark = pytest.mark.anyio


def text_of(result: mt.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


async def test_a_long_call_is_handed_off_then_its_result_is_listed_and_announced() -> None:
    provider = FakeProvider()
    notices: list[Any] = []
    got_notice = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.ResourceListChangedNotification | mt.LoggingMessageNotification):
            notices.append(message)
            if isinstance(message, mt.LoggingMessageNotification):
                got_notice.set()

    async with (
        Gateway(provider, background_after_s=0.05) as gateway,
        Client(gateway.server, mode="legacy", message_handler=on_message) as client,
    ):
        with anyio.fail_after(10):
            names = {tool.name for tool in (await client.list_tools()).tools}
            handed = await client.call_tool("fleet__slow", {})
            task_id = handed.structured_content["task_id"]
            running = await client.call_tool("script_status", {"id": task_id})
            provider.release.set()
            await got_notice.wait()
            listing = await client.call_tool("script_status", {})
            resources = await client.list_resources()
            read = await client.read_resource(f"sagents://tasks/{task_id}")
    assert {"script_status", "script_cancel"} <= names
    assert "continues in the background" in text_of(handed)
    assert running.structured_content["status"] == "running"
    assert isinstance(notices[0], mt.ResourceListChangedNotification)
    assert notices[1].params.data["task_id"] == task_id
    assert notices[1].params.data["status"] == "ok"
    tasks = listing.structured_content["tasks"]
    assert [(t["id"], t["status"], t["result"]) for t in tasks] == [(task_id, "ok", "slow done")]
    assert [str(r.uri) for r in resources.resources] == [f"sagents://tasks/{task_id}"]
    content = read.contents[0]
    assert isinstance(content, mt.TextResourceContents)
    assert json.loads(content.text)["result"] == "slow done"


async def test_a_quick_call_answers_directly_and_leaves_no_task() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=30) as gateway,
        Client(gateway.server) as client,
    ):
        result = await client.call_tool("fleet__status", {})
        listing = await client.call_tool("script_status", {})
    assert result.structured_content == {"tool": "fleet__status", "arguments": {}}
    assert listing.structured_content == {"tasks": []}


async def test_script_cancel_cancels_the_background_call() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.05) as gateway,
        Client(gateway.server, mode="legacy") as client,
    ):
        with anyio.fail_after(10):
            handed = await client.call_tool("fleet__slow", {})
            task_id = handed.structured_content["task_id"]
            cancelled = await client.call_tool("script_cancel", {"id": task_id})
    assert provider.cancelled.is_set()
    assert cancelled.structured_content["status"] == "cancelled"


async def test_another_session_cannot_see_or_cancel_a_task() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider, background_after_s=0.05) as gateway,
        Client(gateway.server, mode="legacy") as owner,
        Client(gateway.server, mode="legacy") as other,
    ):
        with anyio.fail_after(10):
            handed = await owner.call_tool("fleet__slow", {})
            task_id = handed.structured_content["task_id"]
            status = await other.call_tool("script_status", {"id": task_id})
            cancel = await other.call_tool("script_cancel", {"id": task_id})
            listing = await other.call_tool("script_status", {})
            provider.release.set()
    assert status.is_error
    assert "task_not_found" in text_of(status)
    assert cancel.is_error
    assert not provider.cancelled.is_set()
    assert listing.structured_content == {"tasks": []}


async def test_script_tools_reject_bad_ids() -> None:
    async with (
        Gateway(FakeProvider(), background_after_s=1) as gateway,
        Client(gateway.server) as client,
    ):
        missing = await client.call_tool("script_cancel", {})
        wrong_type = await client.call_tool("script_status", {"id": 5})
        unknown = await client.call_tool("script_status", {"id": "nope"})
    assert missing.is_error
    assert "'id' is required" in text_of(missing)
    assert wrong_type.is_error
    assert "must be a string" in text_of(wrong_type)
    assert unknown.is_error
    assert "task_not_found" in text_of(unknown)


async def test_background_tasks_refuse_to_start_outside_their_context() -> None:
    tasks = BackgroundTasks()

    async def call() -> ToolResult:
        return ToolResult.from_text("x")

    with pytest.raises(RuntimeError, match="async with"):
        await tasks.start("s", "t", call)


async def test_get_of_an_unknown_task_raises_task_not_found() -> None:
    async with BackgroundTasks() as tasks:
        with pytest.raises(TaskNotFoundError):
            tasks.get("s", "missing")


async def test_a_background_call_that_raises_ends_as_an_error_and_the_tasks_go_on() -> None:
    # The provider's run_tool is the boundary, but a broken provider raising must not end the
    # task group every background call (and the gateway) runs in.
    release = anyio.Event()
    ended: list[Any] = []
    got_end = anyio.Event()

    async def broken() -> ToolResult:
        await release.wait()
        raise RuntimeError("provider bug")

    async def fine() -> ToolResult:
        return ToolResult.from_text("still here")

    async def on_done(info: Any) -> None:
        ended.append(info)
        got_end.set()

    async with BackgroundTasks() as tasks:
        with anyio.fail_after(10):
            handed = await tasks.start("s1", "fleet__slow", broken)
            assert await tasks.wait(handed, hand_off_after=0.0, on_done=on_done) is None
            release.set()
            await got_end.wait()
            waited = await tasks.start("s1", "fleet__slow", broken)
            waited_result = await tasks.wait(waited, hand_off_after=5.0)
            after = await tasks.start("s1", "fleet__fine", fine)
            result = await tasks.wait(after, hand_off_after=5.0)
            listed = tasks.get("s1", handed)
    (info,) = ended
    assert info.status == "error"
    assert listed.status == "error"
    assert info.result is not None
    assert info.result.error is not None
    assert info.result.error.code == "internal_error"
    assert "provider bug" in info.result.error.message
    assert waited_result is not None
    assert waited_result.is_error
    assert result is not None
    assert result.text == "still here"


async def test_a_hand_off_the_store_cannot_record_is_stopped_and_answered_as_such(
    small_disk: Path,
) -> None:
    """Not a JSON-RPC error for a call that then runs anyway (a client that retries would run
    it twice): the call is stopped, and the answer says why."""
    provider = FakeProvider()
    store = SqliteTaskStore(small_disk / "background.sqlite3")
    async with (
        Gateway(provider, background_after_s=0.05, task_store=store) as gateway,
        Client(gateway.server, mode="legacy") as client,
    ):
        filler = fill_disk(small_disk)
        with anyio.fail_after(30):
            refused = await client.call_tool("fleet__slow", {})
            await provider.cancelled.wait()
        filler.unlink()
        with anyio.fail_after(30):
            handed = await client.call_tool("fleet__slow", {})
            provider.release.set()
    assert refused.is_error
    assert "could not be handed off to the background" in text_of(refused)
    assert "it was stopped" in text_of(refused)
    assert "full" in text_of(refused)
    assert handed.structured_content is not None
    assert handed.structured_content["status"] == "running"


async def test_an_end_the_store_cannot_take_is_written_once_it_can(small_disk: Path) -> None:
    provider = FakeProvider()
    store = SqliteTaskStore(small_disk / "background.sqlite3")
    notices: list[Any] = []
    noticed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.LoggingMessageNotification):
            notices.append(message)
            noticed.set()

    async with (
        Gateway(provider, background_after_s=0.05, task_store=store) as gateway,
        Client(gateway.server, mode="legacy", message_handler=on_message) as client,
    ):
        with anyio.fail_after(30):
            handed = await client.call_tool("fleet__slow", {})
            assert handed.structured_content is not None
            task_id = handed.structured_content["task_id"]
            filler = fill_disk(small_disk)
            provider.release.set()
            await noticed.wait()  # ended, and its end not in the store (the disk is full)
            unwritten = store.get(task_id)
            filler.unlink()
            ended = store.get(task_id)
            while ended is None or ended.status == "running":
                await anyio.sleep(0.1)  # the store's row: polled
                ended = store.get(task_id)
    assert unwritten is not None
    assert unwritten.status == "running"
    assert (ended.status, ended.result) == ("ok", "slow done")


async def test_a_gateway_starting_on_a_full_disk_serves_and_sweeps_nothing_it_cannot_write(
    small_disk: Path,
) -> None:
    store = SqliteTaskStore(small_disk / "background.sqlite3")
    store.started("left", owner="o", tool="run_script", started_at=1.0)  # a previous process's
    filler = fill_disk(small_disk)
    async with (
        Gateway(FakeProvider(), background_after_s=30, task_store=store) as gateway,
        Client(gateway.server) as client,
    ):
        result = await client.call_tool("fleet__status", {})
    filler.unlink()
    left = store.get("left")
    assert not result.is_error
    assert left is not None
    assert left.status == "running"  # swept at the next start that can write it

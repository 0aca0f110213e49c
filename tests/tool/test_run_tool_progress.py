"""Progress from tools run through ToolManager.run_tool reaches the session's subscribers."""

from collections.abc import Awaitable

import anyio
import pytest

from sagents.core.events import ToolProgressEvent
from sagents.progress import ProgressHub
from sagents.tool import (
    SessionContext,
    ToolManager,
    emit_tool_progress,
    emit_tool_progress_from_thread,
)


async def _collect(
    hub: ProgressHub, session_id: str, run: Awaitable[object]
) -> list[ToolProgressEvent]:
    events: list[ToolProgressEvent] = []
    async with hub.subscribe(session_id) as queue:
        await run
        with anyio.fail_after(5):
            while True:
                event = await queue.receive()
                assert isinstance(event, ToolProgressEvent)
                events.append(event)
                if event.closed:
                    return events


@pytest.mark.anyio
async def test_async_tool_progress_reaches_the_session_with_the_call_id() -> None:
    hub = ProgressHub()
    manager = ToolManager(progress_hub=hub)

    async def build(target: str) -> str:
        await emit_tool_progress(f"compiling {target}\n")
        await emit_tool_progress("warning\n", stream="stderr")
        return "built"

    manager.register_tool(build)
    context = SessionContext(session_id="s1")
    call = manager.run_tool("build", {"target": "app"}, context, tool_call_id="call_1")
    events = await _collect(hub, "s1", call)
    assert {e.tool_call_id for e in events} == {"call_1"}
    text = [(e.stream, e.text) for e in events if e.text]
    assert text == [("stdout", "compiling app\n"), ("stderr", "warning\n")]
    assert events[-1].closed


@pytest.mark.anyio
async def test_sync_tool_progress_from_its_worker_thread_is_delivered() -> None:
    hub = ProgressHub()
    manager = ToolManager(progress_hub=hub)

    def count(n: int) -> int:
        for i in range(n):
            emit_tool_progress_from_thread(f"{i}\n")
        return n

    manager.register_tool(count)
    call = manager.run_tool("count", {"n": 3}, SessionContext(session_id="s2"))
    events = await _collect(hub, "s2", call)
    assert "".join(e.text for e in events) == "0\n1\n2\n"
    assert events[0].tool_call_id.startswith("call_")


@pytest.mark.anyio
async def test_progress_never_enters_the_tool_result() -> None:
    manager = ToolManager(progress_hub=ProgressHub())

    async def noisy() -> str:
        await emit_tool_progress("secret progress text")
        return "result"

    manager.register_tool(noisy)
    result = await manager.run_tool("noisy", {})
    assert result.to_tool_message() == "result"

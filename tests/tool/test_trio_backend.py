"""The tool core on trio: ``ToolManager`` and ``ToolProxy`` are anyio code, so the library's call
path (docs/architecture.md, "One tool call") runs on trio as it does on asyncio."""

from __future__ import annotations

import time

import anyio
import pytest

from sagents.core.events import ToolProgressEvent
from sagents.progress import ProgressHub
from sagents.tool import AllowAllApprover, SessionContext, ToolManager, ToolProxy
from sagents.tool.tool_base import tool
from sagents.tool.tool_progress import emit_tool_progress

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@tool(name="add", description="Add two numbers.", permission="read_only")
async def add(a: int, b: int) -> int:
    await emit_tool_progress("adding")
    return a + b


@tool(name="blocking_double", description="Double, in a worker thread.", permission="read_only")
def blocking_double(x: int) -> int:
    time.sleep(0)  # a sync tool runs in a worker thread
    return 2 * x


@tool(name="save", description="Save a note.")
async def save(note: str) -> str:
    return f"saved {note}"


@tool(name="hang", description="Never returns.", permission="read_only")
async def hang() -> None:
    await anyio.sleep_forever()


def _manager() -> ToolManager:
    manager = ToolManager()
    for fn in (add, blocking_double, save, hang):
        manager.register_tool(fn)
    return manager


async def test_local_and_sync_tools_run_and_validate_their_arguments() -> None:
    async with _manager() as manager:
        with anyio.fail_after(30):
            added = await manager.run_tool("add", {"a": 2, "b": "3"})
            doubled = await manager.run_tool("blocking_double", {"x": 21})
            invalid = await manager.run_tool("add", {"a": "x"})
    assert added.structured == {"result": 5}
    assert doubled.to_tool_message() == "42"
    assert invalid.error is not None
    assert invalid.error.code == "invalid_arguments"


async def test_a_timeout_is_an_error_result_and_cancellation_propagates() -> None:
    async with _manager() as manager:
        with anyio.fail_after(30):
            timed_out = await manager.run_tool("hang", {}, timeout=0.05)
        assert timed_out.error is not None
        assert timed_out.error.code == "timeout"
        with anyio.move_on_after(0.05) as scope:
            await manager.run_tool("hang", {})
        assert scope.cancelled_caught


async def test_the_proxy_applies_the_mode_and_asks_the_approver() -> None:
    async with _manager() as manager:
        proxy = ToolProxy(manager, approver=AllowAllApprover())
        context = SessionContext(session_id="s", permission_mode="ask")
        read_only = SessionContext(session_id="s", permission_mode="read_only")
        with anyio.fail_after(30):
            saved = await proxy.run_tool("save", {"note": "n"}, context)
            refused = await proxy.run_tool("save", {"note": "n"}, read_only)
    assert saved.to_tool_message() == "saved n"
    assert refused.error is not None
    assert refused.error.code == "not_allowed"


@tool(name="chatter", description="Report three lines at once.", permission="read_only")
async def chatter() -> str:
    for line in ("one\n", "two\n", "three\n"):
        await emit_tool_progress(line)  # the second and third wait for the window's end
    return "said"


async def test_a_call_someone_listens_to_sends_its_progress_coalesced_then_closed() -> None:
    """A listened call's progress binding (its flusher in a task group on trio, started by the
    first waiting text on asyncio): every line reaches the consumer, then ``closed``."""
    hub = ProgressHub()
    manager = ToolManager(progress_hub=hub)
    manager.register_tool(chatter)
    async with manager, hub.subscribe("s") as events:
        with anyio.fail_after(30):
            result = await manager.run_tool(
                "chatter", {}, SessionContext(session_id="s"), tool_call_id="c1"
            )
            seen = []
            async for event in events:
                assert isinstance(event, ToolProgressEvent)
                seen.append(event)
                if event.closed:
                    break
    assert result.to_tool_message() == "said"
    assert "".join(e.text for e in seen) == "one\ntwo\nthree\n"
    assert [e.closed for e in seen][-1] is True
    assert {e.tool_call_id for e in seen} == {"c1"}

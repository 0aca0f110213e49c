"""Progress from tools run through ToolManager.run_tool reaches the session's subscribers."""

from collections.abc import Awaitable
from typing import Any

import anyio
import pytest

from sagents.core.events import Event, ToolProgressEvent
from sagents.progress import (
    EventQueue,
    ManualClock,
    ProgressHub,
    ProgressSettings,
    ToolCallBinding,
    current_tool_call,
)
from sagents.tool import (
    SessionContext,
    ToolManager,
    emit_tool_progress,
    emit_tool_progress_closed,
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


class _CountingHub(ProgressHub):
    """A hub that counts what it is asked to publish."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.published: list[Event] = []

    def publish(self, session_id: str, event: Event) -> None:
        self.published.append(event)
        super().publish(session_id, event)


def _drain(queue: EventQueue) -> list[ToolProgressEvent]:
    events: list[ToolProgressEvent] = []
    while len(queue):
        event = queue.receive_nowait()
        assert isinstance(event, ToolProgressEvent)
        events.append(event)
    return events


@pytest.mark.anyio
async def test_a_call_nobody_listens_to_publishes_nothing() -> None:
    hub = _CountingHub()
    manager = ToolManager(progress_hub=hub)

    async def chatty() -> str:
        await emit_tool_progress("working\n")
        await emit_tool_progress_closed()
        return "done"

    manager.register_tool(chatty)
    result = await manager.run_tool("chatty", {}, SessionContext(session_id="nobody"))
    assert result.to_tool_message() == "done"
    assert hub.published == []  # not even the closed event


@pytest.mark.anyio
async def test_a_consumer_that_subscribes_during_a_call_gets_its_later_text_and_closed() -> None:
    hub = ProgressHub()
    manager = ToolManager(progress_hub=hub)
    subscribed = anyio.Event()
    started = anyio.Event()

    async def slow() -> str:
        await emit_tool_progress("before anyone listens\n")
        started.set()
        await subscribed.wait()
        await emit_tool_progress("one\n")
        await emit_tool_progress("two\n", stream="stderr")
        return "done"

    manager.register_tool(slow)
    context = SessionContext(session_id="late")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: manager.run_tool("slow", {}, context, tool_call_id="call_late"))
            await started.wait()
            async with hub.subscribe("late") as queue:
                subscribed.set()
                events: list[ToolProgressEvent] = []
                while not (events and events[-1].closed):
                    event = await queue.receive()
                    assert isinstance(event, ToolProgressEvent)
                    events.append(event)
    assert {e.tool_call_id for e in events} == {"call_late"}
    assert [(e.stream, e.text) for e in events if e.text] == [
        ("stdout", "one\n"),
        ("stderr", "two\n"),
    ]
    assert [e.closed for e in events] == [False, False, True]


@pytest.mark.anyio
async def test_a_call_started_while_someone_listens_coalesces_its_text() -> None:
    clock = ManualClock()
    hub = ProgressHub(settings=ProgressSettings(flush_interval_s=10.0), clock=clock)
    manager = ToolManager(progress_hub=hub)

    async def burst() -> str:
        for piece in ("a", "b", "c"):
            await emit_tool_progress(piece)
        return "done"

    manager.register_tool(burst)
    async with hub.subscribe("s") as queue:
        await manager.run_tool("burst", {}, SessionContext(session_id="s"), tool_call_id="c1")
        events = _drain(queue)
    # The first piece goes out at once; the rest wait for the window and leave as one event.
    assert [e.text for e in events if not e.closed] == ["a", "bc"]
    assert events[-1].closed


@pytest.mark.anyio
async def test_a_nested_quiet_call_restores_the_outer_calls_binding() -> None:
    manager = ToolManager(progress_hub=ProgressHub())
    seen: list[str | None] = []

    async def inner() -> str:
        binding = current_tool_call()
        seen.append(binding.tool_call_id if binding else None)
        return "inner"

    async def outer() -> str:
        await manager.run_tool("inner", {}, tool_call_id="call_inner")
        binding = current_tool_call()
        seen.append(binding.tool_call_id if binding else None)
        return "outer"

    manager.register_tool(inner)
    manager.register_tool(outer)
    await manager.run_tool("outer", {}, tool_call_id="call_outer")
    assert seen == ["call_inner", "call_outer"]
    assert current_tool_call() is None


@pytest.mark.anyio
async def test_a_call_of_no_session_and_no_id_binds_nothing_unless_it_runs_inside_a_call() -> None:
    hub = _CountingHub()
    manager = ToolManager(progress_hub=hub)
    seen: list[object] = []

    async def inner() -> str:
        await emit_tool_progress("nobody can listen to this\n")
        seen.append(current_tool_call())
        return "inner"

    async def outer() -> str:
        binding = current_tool_call()
        await manager.run_tool("inner", {})  # nested: bound, so the outer binding is hidden
        seen.append(current_tool_call() is binding)
        return "outer"

    manager.register_tool(inner)
    manager.register_tool(outer)
    assert (await manager.run_tool("inner", {})).to_tool_message() == "inner"
    assert seen == [None]  # at the top, nobody can listen: nothing was bound
    assert (await manager.run_tool("outer", {}, tool_call_id="call_outer")).text == "outer"
    nested = seen[1]
    assert isinstance(nested, ToolCallBinding)
    assert nested.tool_call_id not in ("call_outer", "")  # its own id, drawn when asked
    assert seen[2] is True  # the outer binding is back after the nested call
    assert hub.published == []
    assert current_tool_call() is None


@pytest.mark.anyio
async def test_a_listened_call_whose_text_never_waits_starts_no_helper_task() -> None:
    hub = ProgressHub(settings=ProgressSettings(flush_interval_s=10.0))
    manager = ToolManager(progress_hub=hub)
    counts: list[int] = []

    async def once() -> str:
        await emit_tool_progress("sent at once\n")  # the leading edge: nothing waits
        counts.append(len(anyio.get_running_tasks()))
        return "done"

    manager.register_tool(once)
    async with hub.subscribe("s") as queue:
        before = len(anyio.get_running_tasks())
        await manager.run_tool("once", {}, SessionContext(session_id="s"))
        events = _drain(queue)
    assert counts == [before]
    assert [e.text for e in events] == ["sent at once\n", ""]


@pytest.mark.anyio
async def test_a_call_that_says_nothing_sends_no_progress_event_at_all() -> None:
    """No empty ``closed`` event for a call without progress (a synchronous tool, an async
    one that emits nothing); a call that said something still gets its ``closed``."""
    hub = ProgressHub()
    manager = ToolManager(progress_hub=hub)

    def add(a: int, b: int) -> int:
        return a + b

    async def quiet() -> str:
        return "done"

    async def talks() -> str:
        await emit_tool_progress("step\n")
        return "done"

    for function in (add, quiet, talks):
        manager.register_tool(function)
    context = SessionContext(session_id="s1")
    async with hub.subscribe("s1") as queue:
        await manager.run_tool("add", {"a": 1, "b": 2}, context, tool_call_id="call_add")
        await manager.run_tool("quiet", {}, context, tool_call_id="call_quiet")
        silent: list[Event] = []
        while len(queue):
            silent.append(queue.receive_nowait())
        await manager.run_tool("talks", {}, context, tool_call_id="call_talks")
        said: list[Event] = []
        while len(queue):
            said.append(queue.receive_nowait())
    assert silent == []
    shown = [(e.tool_call_id, e.text, e.closed) for e in said if isinstance(e, ToolProgressEvent)]
    assert shown == [("call_talks", "step\n", False), ("call_talks", "", True)]

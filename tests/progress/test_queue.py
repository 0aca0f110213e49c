import anyio
import pytest

from sagents.core.events import (
    ApprovalRequestEvent,
    BackgroundDoneEvent,
    ScriptProgressEvent,
    ToolProgressEvent,
)
from sagents.errors import ConsumerLaggedError
from sagents.progress import EventQueue, QueueStats

TS = 1.0


def text(call: str, value: str, stream: str = "stdout") -> ToolProgressEvent:
    return ToolProgressEvent(tool_call_id=call, text=value, stream=stream, ts=TS)  # type: ignore[arg-type]


def closed(call: str) -> ToolProgressEvent:
    return ToolProgressEvent(tool_call_id=call, text="", stream="info", closed=True, ts=TS)


def snapshot(script: str, calls: int, status: str = "running") -> ScriptProgressEvent:
    return ScriptProgressEvent(script_id=script, calls=calls, status=status, ts=TS)  # type: ignore[arg-type]


def drain(queue: EventQueue) -> list[object]:
    out: list[object] = []
    while True:
        try:
            out.append(queue.receive_nowait())
        except anyio.WouldBlock:
            return out


def test_events_come_out_in_the_order_they_went_in() -> None:
    queue = EventQueue()
    events = [text("a", "1"), closed("a"), text("b", "2")]
    for event in events:
        assert queue.offer(event)
    assert drain(queue) == events
    assert queue.stats == QueueStats(queued=3, delivered=3)


def test_progress_over_the_bound_is_dropped_and_counted_in_bytes() -> None:
    queue = EventQueue(max_buffered=2)
    assert queue.offer(text("a", "1"))
    assert queue.offer(text("b", "2"))
    assert not queue.offer(text("c", "日本"))
    assert drain(queue) == [text("a", "1"), text("b", "2")]
    assert queue.stats.dropped_events == 1
    assert queue.stats.dropped_bytes == 6  # two characters, six UTF-8 bytes


def test_progress_under_pressure_merges_into_the_same_calls_tail() -> None:
    queue = EventQueue(max_buffered=1)
    queue.offer(text("a", "x"))
    assert queue.offer(text("a", "y"))
    assert not queue.offer(text("a", "z", stream="stderr"))
    assert [e.text for e in drain(queue)] == ["xy"]  # type: ignore[attr-defined]
    assert (queue.stats.coalesced, queue.stats.dropped_events) == (1, 1)


def test_merging_under_pressure_stops_at_64_kib_of_utf8() -> None:
    queue = EventQueue(max_buffered=1)
    queue.offer(text("a", "é" * 20_000))  # 40,000 bytes
    assert queue.offer(text("a", "é" * 12_000))  # 64,000 bytes merged: fits
    assert not queue.offer(text("a", "é" * 1_000))  # 66,000 bytes would not
    assert [len(e.text) for e in drain(queue)] == [32_000]  # type: ignore[attr-defined]
    assert queue.stats.dropped_bytes == 2_000


def test_never_dropped_events_are_queued_under_pressure_in_order() -> None:
    queue = EventQueue(max_buffered=1)
    approval = ApprovalRequestEvent(request_id="r", message="ok?", ts=TS)
    done = BackgroundDoneEvent(handle="h", status="ok", ts=TS)
    queue.offer(text("a", "x"))
    queue.offer(text("b", "lost"))
    for event in (closed("a"), approval, snapshot("s", 3, "ok"), done):
        assert queue.offer(event)
    assert drain(queue) == [text("a", "x"), closed("a"), approval, snapshot("s", 3, "ok"), done]


def test_a_newer_script_snapshot_replaces_the_waiting_one() -> None:
    queue = EventQueue()
    queue.offer(snapshot("s", 1))
    queue.offer(text("a", "x"))
    queue.offer(snapshot("s", 2))
    queue.offer(snapshot("s", 3, "error"))
    assert drain(queue) == [snapshot("s", 3, "error"), text("a", "x")]
    assert queue.stats.coalesced == 2


def test_a_final_snapshot_replacing_a_running_one_is_no_longer_droppable() -> None:
    queue = EventQueue(max_buffered=1)
    queue.offer(snapshot("s", 1))
    queue.offer(snapshot("s", 2, "ok"))
    assert queue.offer(text("a", "fits: the droppable slot was freed"))


def test_a_consumer_too_far_behind_gets_what_was_queued_then_a_lag_error() -> None:
    queue = EventQueue(max_critical=2)
    queue.offer(closed("a"))
    queue.offer(closed("b"))
    assert not queue.offer(closed("c"))
    assert queue.lagged
    assert drain_until_error(queue) == [closed("a"), closed("b")]


def drain_until_error(queue: EventQueue) -> list[object]:
    out: list[object] = []
    while len(queue):
        out.append(queue.receive_nowait())
    with pytest.raises(ConsumerLaggedError, match="never-dropped events behind"):
        queue.receive_nowait()
    return out


@pytest.mark.anyio
async def test_closing_ends_the_iteration_after_the_waiting_events() -> None:
    queue = EventQueue()
    queue.offer(text("a", "x"))
    queue.close()
    assert not queue.offer(text("a", "late"))
    with anyio.fail_after(1):
        assert [e async for e in queue] == [text("a", "x")]
    assert queue.stats.dropped_events == 1


@pytest.mark.anyio
async def test_receive_waits_for_the_next_event() -> None:
    queue = EventQueue()
    received: list[object] = []

    async def consume() -> None:
        received.append(await queue.receive())

    with anyio.fail_after(1):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.wait_all_tasks_blocked()
            assert received == []
            queue.offer(text("a", "x"))
    assert received == [text("a", "x")]


@pytest.mark.parametrize("kwargs", [{"max_buffered": 0}, {"max_critical": 0}])
def test_queue_bounds_below_one_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        EventQueue(**kwargs)

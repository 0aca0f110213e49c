import anyio
import pytest

from sagents.core.events import ApprovalResultEvent, ToolProgressEvent
from sagents.progress import (
    EventQueue,
    ProgressHub,
    ProgressSettings,
    bind_tool_call,
    default_hub,
    emit_tool_progress,
    register_progress_queue,
    subscribe,
    unregister_progress_queue,
)

TS = 1.0


def event(value: str) -> ToolProgressEvent:
    return ToolProgressEvent(tool_call_id="c", text=value, ts=TS)


def test_a_second_consumer_gets_its_own_queue_and_both_receive() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    first, second = EventQueue(), EventQueue()
    hub.register_progress_queue("s1", first)
    hub.register_progress_queue("s1", second)
    hub.publish("s1", event("x"))
    assert first.receive_nowait() == second.receive_nowait() == event("x")
    assert hub.queues("s1") == (first, second)


def test_sessions_are_kept_apart() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    mine, other = EventQueue(), EventQueue()
    hub.register_progress_queue("s1", mine)
    hub.register_progress_queue("s2", other)
    hub.publish("s2", event("x"))
    with pytest.raises(anyio.WouldBlock):
        mine.receive_nowait()


def test_unregistering_one_consumer_leaves_the_other() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    first, second = EventQueue(), EventQueue()
    hub.register_progress_queue("s1", first)
    hub.register_progress_queue("s1", second)
    hub.unregister_progress_queue("s1", first)
    assert first.closed
    assert hub.queues("s1") == (second,)
    hub.unregister_progress_queue("s1")
    assert second.closed
    assert hub.queues("s1") == ()


def test_unregistering_unknown_sessions_and_queues_is_a_no_op() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    queue = EventQueue()
    hub.unregister_progress_queue("nobody")
    hub.register_progress_queue("s1", queue)
    hub.unregister_progress_queue("s1", EventQueue())
    assert hub.queues("s1") == (queue,)
    assert not queue.closed


def test_registering_a_queue_twice_or_a_closed_queue_is_refused() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    queue = EventQueue()
    hub.register_progress_queue("s1", queue)
    with pytest.raises(ValueError, match="already registered for session 's1'"):
        hub.register_progress_queue("s2", queue)
    dead = EventQueue()
    dead.close()
    with pytest.raises(ValueError, match="closed queue"):
        hub.register_progress_queue("s1", dead)


def test_a_session_unregistered_whole_takes_new_queues_and_others_stay_registered() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    first, second, other = EventQueue(), EventQueue(), EventQueue()
    hub.register_progress_queue("s1", first)
    hub.register_progress_queue("s1", second)
    hub.register_progress_queue("s2", other)
    hub.unregister_progress_queue("s1")  # every queue of s1
    assert first.closed
    assert second.closed
    assert hub.queues("s1") == ()
    fresh = EventQueue()
    hub.register_progress_queue("s1", fresh)
    assert hub.queues("s1") == (fresh,)
    with pytest.raises(ValueError, match="already registered for session 's2'"):
        hub.register_progress_queue("s1", other)


def test_disabled_progress_silences_tool_progress_only() -> None:
    hub = ProgressHub(environ={"SAGE_TOOL_PROGRESS_ENABLED": "false"})
    queue = EventQueue()
    hub.register_progress_queue("s1", queue)
    approval = ApprovalResultEvent(request_id="r", approved=True, ts=TS)
    hub.publish("s1", event("x"))
    hub.publish("s1", approval)
    assert queue.receive_nowait() == approval
    with pytest.raises(anyio.WouldBlock):
        queue.receive_nowait()


def test_a_lagging_consumer_is_unregistered_and_the_others_keep_receiving() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    slow, fast = EventQueue(max_critical=1), EventQueue()
    hub.register_progress_queue("s1", slow)
    hub.register_progress_queue("s1", fast)
    for n in range(3):
        hub.publish("s1", ApprovalResultEvent(request_id=str(n), approved=True, ts=TS))
    assert slow.lagged
    assert hub.queues("s1") == (fast,)
    assert len(fast) == 3


@pytest.mark.anyio
async def test_subscribe_registers_for_the_block_only() -> None:
    hub = ProgressHub(settings=ProgressSettings())
    async with hub.subscribe("s1", max_buffered=3) as events:
        assert hub.queues("s1") == (events,)
        hub.publish("s1", event("x"))
    assert hub.queues("s1") == ()
    with anyio.fail_after(1):
        assert [e async for e in events] == [event("x")]


@pytest.mark.anyio
async def test_a_slow_consumer_never_blocks_a_tool_and_still_gets_closed() -> None:
    hub = ProgressHub(settings=ProgressSettings(flush_interval_s=0, max_buffered=8))
    async with hub.subscribe("s1") as events:
        with anyio.fail_after(5):
            async with bind_tool_call(hub, "s1", "call_1"):
                for n in range(10_000):
                    await emit_tool_progress(f"line {n}\n", stream="stdout" if n % 2 else "stderr")
        received = []
        while len(events):
            received.append(events.receive_nowait())
    assert len(received) <= 9
    assert received[-1] == ToolProgressEvent(
        tool_call_id="call_1", text="", stream="info", closed=True, ts=received[-1].ts
    )
    stats = events.stats
    assert stats.coalesced + stats.dropped_events == 10_000 - 8  # 8 fitted, closed was queued
    assert stats.dropped_events > 0
    assert stats.dropped_bytes > 0


@pytest.mark.anyio
async def test_module_level_functions_use_the_process_default_hub() -> None:
    queue = EventQueue()
    register_progress_queue("default-session", queue)
    try:
        assert default_hub().queues("default-session") == (queue,)
        async with subscribe("default-session") as second:
            assert default_hub().queues("default-session") == (queue, second)
    finally:
        unregister_progress_queue("default-session")
    assert default_hub().queues("default-session") == ()
    assert queue.closed

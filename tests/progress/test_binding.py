from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from anyio import wait_all_tasks_blocked
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents.core.events import Event, ToolProgressEvent
from sagents.progress import (
    EventQueue,
    ManualClock,
    ProgressHub,
    ProgressSettings,
    bind_tool_call,
    current_tool_call,
    emit_tool_progress,
    emit_tool_progress_closed,
    emit_tool_progress_from_thread,
)


def make_hub(clock: ManualClock, **kwargs: Any) -> ProgressHub:
    return ProgressHub(settings=ProgressSettings(**kwargs), clock=clock)


def waiting(queue: EventQueue) -> list[Event]:
    out: list[Event] = []
    while len(queue):
        out.append(queue.receive_nowait())
    return out


def texts(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.stream, e.text) for e in events if isinstance(e, ToolProgressEvent) and not e.closed]


@pytest.mark.anyio
async def test_emitting_outside_a_bound_tool_call_is_a_silent_no_op() -> None:
    assert current_tool_call() is None
    await emit_tool_progress("nobody listens")
    await emit_tool_progress_closed()


@pytest.mark.anyio
async def test_a_bad_stream_or_text_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown progress stream 'err'"):
        await emit_tool_progress("x", stream="err")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a str, not bytes"):
        await emit_tool_progress(b"x")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_text_within_the_window_is_coalesced_and_sent_when_it_ends() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "call_1"):
        await emit_tool_progress("a")
        await emit_tool_progress("b")
        clock.advance(0.02)
        await emit_tool_progress("c")
        await wait_all_tasks_blocked()
        assert texts(waiting(events)) == [("stdout", "a")]
        clock.advance(0.02)
        await wait_all_tasks_blocked()
        assert len(events) == 0  # 40 ms: the window is still open
        clock.advance(0.01)
        with anyio.fail_after(1):
            flushed = await events.receive()
        assert texts([flushed]) == [("stdout", "bc")]


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_waiting_text_goes_out_when_its_window_ends_on_asyncio_and_trio(
    anyio_backend: str,
) -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with hub.subscribe("s") as events:
        async with bind_tool_call(hub, "s", "call_1"):
            await emit_tool_progress("a")
            await emit_tool_progress("b")  # waits for the window: the flusher starts
            clock.advance(0.05)
            with anyio.fail_after(5):
                first, flushed = await events.receive(), await events.receive()
            await emit_tool_progress("c")  # in the window of the flush: c and d wait
            await emit_tool_progress("d")  # still waiting when the call ends
        delivered = waiting(events)
    assert texts([first, flushed]) == [("stdout", "a"), ("stdout", "b")]
    assert texts(delivered) == [("stdout", "cd")]
    assert isinstance(delivered[-1], ToolProgressEvent)
    assert delivered[-1].closed


@pytest.mark.anyio
async def test_with_the_system_clock_waiting_text_arrives_without_further_emits() -> None:
    hub = ProgressHub(settings=ProgressSettings(flush_interval_s=0.01))
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "c"):
        await emit_tool_progress("a")
        await emit_tool_progress("b")
        with anyio.fail_after(5):
            assert texts([await events.receive(), await events.receive()]) == [
                ("stdout", "a"),
                ("stdout", "b"),
            ]


@pytest.mark.anyio
async def test_text_after_a_quiet_window_goes_out_at_once() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "call_1"):
        await emit_tool_progress("a")
        clock.advance(0.05)
        await emit_tool_progress("b")
        assert texts(waiting(events)) == [("stdout", "a"), ("stdout", "b")]


@pytest.mark.anyio
async def test_the_byte_threshold_counts_utf8_bytes_not_characters() -> None:
    clock = ManualClock()
    hub = make_hub(clock, flush_bytes=8)
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "c") as binding:
        await emit_tool_progress("start")
        await emit_tool_progress("éé")  # 2 characters, 4 bytes
        assert binding.pending_bytes == 4
        await emit_tool_progress("é€")  # 2 characters, 5 bytes: 9 bytes >= 8
        assert binding.pending_bytes == 0
        assert texts(waiting(events)) == [("stdout", "start"), ("stdout", "ééé€")]


@pytest.mark.anyio
async def test_a_zero_interval_sends_every_piece_at_once() -> None:
    clock = ManualClock()
    hub = make_hub(clock, flush_interval_s=0)
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "c"):
        for piece in "abc":
            await emit_tool_progress(piece)
        assert texts(waiting(events)) == [("stdout", "a"), ("stdout", "b"), ("stdout", "c")]


@pytest.mark.anyio
async def test_stdout_and_stderr_keep_their_relative_order() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "c"):
        await emit_tool_progress("1", stream="stdout")
        await emit_tool_progress("2", stream="stdout")
        await emit_tool_progress("3", stream="stderr")
        await emit_tool_progress("4", stream="stderr")
        await emit_tool_progress("5", stream="stdout")
        await emit_tool_progress_closed()
        delivered = waiting(events)
    assert texts(delivered) == [
        ("stdout", "1"),
        ("stdout", "2"),
        ("stderr", "3"),
        ("stderr", "4"),
        ("stdout", "5"),
    ]


@pytest.mark.anyio
async def test_a_stream_whose_window_ends_sooner_is_flushed_on_time() -> None:
    clock = ManualClock()
    hub = make_hub(clock, flush_interval_s=1.0)
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "c"):
        await emit_tool_progress("e1", stream="stderr")  # stderr sent at t=0
        clock.advance(0.5)
        await emit_tool_progress("o1")  # stdout sent at t=0.5
        await emit_tool_progress("o2")  # waits: due at t=1.5
        await wait_all_tasks_blocked()
        await emit_tool_progress("e2", stream="stderr")  # flushes o2; e2 due at t=1.0
        await wait_all_tasks_blocked()
        assert texts(waiting(events)) == [("stderr", "e1"), ("stdout", "o1"), ("stdout", "o2")]
        clock.advance(0.5)
        with anyio.fail_after(1):
            assert texts([await events.receive()]) == [("stderr", "e2")]


@pytest.mark.anyio
async def test_closed_flushes_every_stream_then_sends_closed_once() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with hub.subscribe("s") as events:
        async with bind_tool_call(hub, "s", "call_9") as binding:
            await emit_tool_progress("a", stream="info")
            await emit_tool_progress("b", stream="info")
            await emit_tool_progress_closed()
            assert binding.closed
            await emit_tool_progress("ignored")
        delivered = waiting(events)
    assert texts(delivered) == [("info", "a"), ("info", "b")]
    closed = [e for e in delivered if isinstance(e, ToolProgressEvent) and e.closed]
    assert closed == [delivered[-1]]
    assert closed[0].tool_call_id == "call_9"
    assert closed[0].ts == clock.time()


@pytest.mark.anyio
async def test_a_failing_tool_still_sends_closed_and_its_error_is_not_grouped() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with hub.subscribe("s") as events:

        async def failing_tool() -> None:
            async with bind_tool_call(hub, "s", "c"):
                await emit_tool_progress("a")
                await emit_tool_progress("pending")
                raise KeyError("boom")

        with pytest.raises(KeyError, match="boom"):
            await failing_tool()
        delivered = waiting(events)
    assert texts(delivered) == [("stdout", "a"), ("stdout", "pending")]
    assert isinstance(delivered[-1], ToolProgressEvent)
    assert delivered[-1].closed
    assert current_tool_call() is None


@pytest.mark.anyio
async def test_a_cancelled_tool_still_flushes_and_sends_closed() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with hub.subscribe("s") as events:
        with anyio.fail_after(1), anyio.CancelScope() as scope:
            async with bind_tool_call(hub, "s", "c"):
                await emit_tool_progress("a")
                await emit_tool_progress("b")
                scope.cancel()
                await anyio.sleep_forever()
        delivered = waiting(events)
    assert texts(delivered) == [("stdout", "a"), ("stdout", "b")]
    assert isinstance(delivered[-1], ToolProgressEvent)
    assert delivered[-1].closed


@pytest.mark.anyio
async def test_unregistering_a_consumer_flushes_pending_text_to_it() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with bind_tool_call(hub, "s", "c"):
        async with hub.subscribe("s") as events:
            await emit_tool_progress("a")
            await emit_tool_progress("b")
        with anyio.fail_after(1):
            delivered = [e async for e in events]
        assert texts(delivered) == [("stdout", "a"), ("stdout", "b")]


@pytest.mark.anyio
async def test_disabled_progress_sends_no_tool_progress_at_all() -> None:
    clock = ManualClock()
    hub = make_hub(clock, enabled=False)
    async with hub.subscribe("s") as events:
        async with bind_tool_call(hub, "s", "c"):
            await emit_tool_progress("a")
            await emit_tool_progress_closed()
        assert len(events) == 0


@pytest.mark.anyio
async def test_a_nested_tool_call_binds_its_own_id_and_restores_the_outer() -> None:
    clock = ManualClock()
    hub = make_hub(clock, flush_interval_s=0)
    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "outer"):
        async with bind_tool_call(hub, "s", "inner"):
            await emit_tool_progress("i")
        await emit_tool_progress("o")
        delivered = waiting(events)
    assert [(e.tool_call_id, e.text) for e in delivered if isinstance(e, ToolProgressEvent)] == [
        ("inner", "i"),
        ("inner", ""),
        ("outer", "o"),
    ]


@pytest.mark.anyio
async def test_progress_never_reaches_a_session_without_consumers() -> None:
    clock = ManualClock()
    hub = make_hub(clock)
    async with bind_tool_call(hub, "s", "c"):
        await emit_tool_progress("into the void")
    async with hub.subscribe("s") as events:
        assert len(events) == 0


@pytest.mark.anyio
async def test_a_sync_tool_in_a_worker_thread_reports_progress() -> None:
    clock = ManualClock()
    hub = make_hub(clock, flush_interval_s=0)

    def sync_tool() -> str:
        emit_tool_progress_from_thread("from the worker\n")
        emit_tool_progress_from_thread("warning\n", stream="stderr")
        return "done"

    async with hub.subscribe("s") as events, bind_tool_call(hub, "s", "c"):
        with anyio.fail_after(5):
            assert await anyio.to_thread.run_sync(sync_tool) == "done"
        emit_tool_progress_from_thread("on the loop thread\n")
        delivered = waiting(events)
    assert texts(delivered) == [
        ("stdout", "from the worker\n"),
        ("stderr", "warning\n"),
        ("stdout", "on the loop thread\n"),
    ]


def test_emitting_from_a_thread_outside_a_tool_call_is_a_no_op_but_checks_input() -> None:
    emit_tool_progress_from_thread("nobody listens")
    with pytest.raises(ValueError, match="unknown progress stream"):
        emit_tool_progress_from_thread("x", stream="out")  # type: ignore[arg-type]


pieces = st.lists(
    st.tuples(
        st.text(max_size=40),
        st.sampled_from(["stdout", "stderr", "info"]),
        st.sampled_from([0.0, 0.01, 0.05, 0.2]),
    ),
    max_size=30,
)


async def settle() -> None:
    """Let woken tasks run (wait_all_tasks_blocked polls every 0.1 s: too slow for examples)."""
    for _ in range(5):
        await anyio.lowlevel.checkpoint()


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """One event loop for every hypothesis example (starting a loop costs ~0.1 s here)."""
    with start_blocking_portal(backend="asyncio") as running:
        yield running


@settings(max_examples=60)
@given(pieces=pieces, flush_bytes=st.integers(min_value=1, max_value=64))
def test_delivered_text_equals_emitted_text_in_order(
    portal: BlockingPortal, pieces: list[tuple[str, Any, float]], flush_bytes: int
) -> None:
    async def run() -> list[Event]:
        clock = ManualClock()
        hub = make_hub(clock, flush_bytes=flush_bytes, max_buffered=10_000)
        async with hub.subscribe("s") as events:
            async with bind_tool_call(hub, "s", "c"):
                for text, stream, pause in pieces:
                    await emit_tool_progress(text, stream=stream)
                    clock.advance(pause)
                    await settle()
            return waiting(events)

    delivered = portal.call(run)

    def per_character(segments: list[tuple[str, str]]) -> list[str]:
        return [f"{stream}:{char}" for stream, text in segments for char in text]

    assert per_character(texts(delivered)) == per_character([(s, t) for t, s, _ in pieces])
    assert all(text for _, text in texts(delivered))
    said = any(text for text, _, _ in pieces)  # a call that said nothing closes nothing
    closed = sum(1 for e in delivered if isinstance(e, ToolProgressEvent) and e.closed)
    assert closed == (1 if said else 0)


@pytest.mark.anyio
async def test_a_lazy_binding_is_built_only_when_someone_listens() -> None:
    from sagents.progress._binding import LazyToolCall, listened_tool_call

    hub = ProgressHub()
    pending = LazyToolCall(hub, "lazy", "call_lazy")
    token = pending.bind()
    try:
        await emit_tool_progress("nobody hears this")
        assert listened_tool_call() is None
        assert pending._binding is None  # nothing was built for the quiet call
        queue = EventQueue()
        hub.register_progress_queue("lazy", queue)
        binding = listened_tool_call()
        assert binding is not None
        assert binding.tool_call_id == "call_lazy"
        await emit_tool_progress("heard")
    finally:
        pending.unbind(token)
    events = waiting(queue)
    assert texts(events) == [("stdout", "heard")]
    assert isinstance(events[-1], ToolProgressEvent)
    assert events[-1].closed


@pytest.mark.anyio
async def test_a_lazy_binding_without_a_session_draws_ids_only_when_asked() -> None:
    from sagents.progress._binding import LazyToolCall

    pending = LazyToolCall(ProgressHub(), None, None)
    with pending:
        binding = current_tool_call()
        assert binding is not None
        assert binding.tool_call_id.startswith("call_")
        assert len(binding.session_id) == 32
    assert current_tool_call() is None

import functools
import itertools
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import pytest
from anyio import wait_all_tasks_blocked
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents.core.events import ScriptProgressEvent, ScriptStatus, ToolProgressEvent
from sagents.progress import ManualClock, ProgressHub, ProgressSettings, ScriptProgressThrottle


def snap(calls: int, status: ScriptStatus = "running") -> ScriptProgressEvent:
    return ScriptProgressEvent(script_id="run", calls=calls, status=status, ts=1.0)


@pytest.mark.anyio
async def test_the_first_snapshot_goes_out_and_later_ones_wait_for_the_second() -> None:
    clock = ManualClock()
    sent: list[ScriptProgressEvent] = []
    async with ScriptProgressThrottle(sent.append, clock=clock) as throttle:
        throttle.update(snap(1))
        throttle.update(snap(2))
        clock.advance(0.5)
        throttle.update(snap(3))
        await wait_all_tasks_blocked()
        assert [s.calls for s in sent] == [1]
        clock.advance(0.4)
        await wait_all_tasks_blocked()
        assert [s.calls for s in sent] == [1]
        clock.advance(0.1)
        with anyio.fail_after(1):
            while len(sent) < 2:
                await wait_all_tasks_blocked()
        assert [s.calls for s in sent] == [1, 3]  # the last value, not the one in between
        assert throttle.pending is None


@pytest.mark.anyio
async def test_a_throttle_given_a_task_group_runs_its_timer_there_and_stops_it_on_leaving() -> None:
    clock = ManualClock()
    sent: list[ScriptProgressEvent] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as owner:  # ends only once the timer has ended
            async with ScriptProgressThrottle(
                sent.append, clock=clock, task_group=owner
            ) as throttle:
                throttle.update(snap(1))
                throttle.update(snap(2))
                await wait_all_tasks_blocked()
                assert [s.calls for s in sent] == [1]
                clock.advance(1.0)
                while len(sent) < 2:  # the trailing snapshot, sent by the owner's task
                    await wait_all_tasks_blocked()
                throttle.update(snap(3))
            assert [s.calls for s in sent] == [1, 2, 3]  # leaving delivered the waiting one


@pytest.mark.anyio
async def test_a_final_snapshot_goes_out_at_once_and_ends_the_throttle() -> None:
    clock = ManualClock()
    sent: list[ScriptProgressEvent] = []
    async with ScriptProgressThrottle(sent.append, clock=clock) as throttle:
        throttle.update(snap(1))
        throttle.update(snap(2))
        throttle.update(snap(3, "ok"))
        throttle.update(snap(4))
    assert [(s.calls, s.status) for s in sent] == [(1, "running"), (3, "ok")]


@pytest.mark.anyio
async def test_leaving_the_block_delivers_the_waiting_snapshot() -> None:
    clock = ManualClock()
    sent: list[ScriptProgressEvent] = []
    async with ScriptProgressThrottle(sent.append, clock=clock) as throttle:
        throttle.update(snap(1))
        throttle.update(snap(2))
    assert [s.calls for s in sent] == [1, 2]


@pytest.mark.anyio
async def test_an_error_in_the_block_propagates_unchanged_after_delivery() -> None:
    clock = ManualClock()
    sent: list[ScriptProgressEvent] = []

    async def run() -> None:
        async with ScriptProgressThrottle(sent.append, clock=clock) as throttle:
            throttle.update(snap(1))
            throttle.update(snap(2))
            raise LookupError("script crashed")

    with pytest.raises(LookupError, match="script crashed"):
        await run()
    assert [s.calls for s in sent] == [1, 2]


@pytest.mark.anyio
async def test_the_final_snapshot_reaches_a_consumer_whose_queue_is_full_of_progress() -> None:
    clock = ManualClock()
    hub = ProgressHub(settings=ProgressSettings(max_buffered=2), clock=clock)
    async with hub.subscribe("s") as events:
        for n in range(5):
            hub.publish("s", ToolProgressEvent(tool_call_id=f"c{n}", text="x", ts=1.0))
        async with ScriptProgressThrottle(functools.partial(hub.publish, "s"), clock=clock) as t:
            t.update(snap(1))
            t.update(snap(7, "ok"))
        received = [events.receive_nowait() for _ in range(len(events))]
    assert received[-1] == snap(7, "ok")
    assert snap(1) not in received  # the queue was full: a running snapshot may be dropped


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        ScriptProgressThrottle(print, interval_s=0)


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
@given(gaps=st.lists(st.sampled_from([0.0, 0.1, 0.3, 0.7, 1.0, 2.5]), min_size=1, max_size=25))
def test_running_snapshots_are_at_most_one_per_second_and_the_last_arrives(
    portal: BlockingPortal,
    gaps: list[float],
) -> None:
    async def run() -> list[tuple[float, int]]:
        clock = ManualClock()
        sent: list[tuple[float, int]] = []
        async with ScriptProgressThrottle(
            lambda s: sent.append((clock.monotonic(), s.calls)), clock=clock
        ) as throttle:
            for calls, gap in enumerate(gaps):
                throttle.update(snap(calls))
                clock.advance(gap)
                await settle()
            clock.advance(1.0)
            await settle()
        return sent

    sent = portal.call(run)
    times = [t for t, _ in sent]
    assert all(later - earlier >= 1.0 - 1e-9 for earlier, later in itertools.pairwise(times))
    assert sent[-1][1] == len(gaps) - 1
    assert [c for _, c in sent] == sorted({c for _, c in sent})

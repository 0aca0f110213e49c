import anyio
import pytest

from sagents.progress import Clock, ManualClock, SystemClock


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(SystemClock(), Clock)
    assert isinstance(ManualClock(), Clock)


def test_the_manual_clock_keeps_wall_time_in_step() -> None:
    clock = ManualClock(start=10.0, wall_start=1000.0)
    clock.advance(2.5)
    assert (clock.monotonic(), clock.time()) == (12.5, 1002.5)


def test_the_manual_clock_cannot_go_back() -> None:
    with pytest.raises(ValueError, match="cannot go back"):
        ManualClock().advance(-1)


@pytest.mark.anyio
async def test_a_sleeper_wakes_only_once_its_deadline_is_reached() -> None:
    clock = ManualClock()
    woke = anyio.Event()

    async def sleeper() -> None:
        await clock.sleep_until(1.0)
        woke.set()

    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)
            await anyio.wait_all_tasks_blocked()
            clock.advance(0.5)
            await anyio.wait_all_tasks_blocked()
            assert not woke.is_set()
            assert clock.sleepers == 1
            clock.advance(0.5)
            await woke.wait()
    assert clock.sleepers == 0


@pytest.mark.anyio
async def test_the_system_clock_returns_at_once_for_a_past_deadline() -> None:
    clock = SystemClock()
    with anyio.fail_after(2):
        await clock.sleep_until(clock.monotonic() - 1)
    assert clock.time() > 1_600_000_000

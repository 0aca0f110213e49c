"""The idle timeout of a streamed answer (``CallBudget.next``, docs/agent.md "The model seam"):
each wait for a next piece is bounded, never the consumer's code between pieces, and a
cancellation from outside stays one."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import anyio
import pytest

from sagents.agent._retry import CallBudget
from sagents.errors import ModelTimeoutError
from tests.agent.helpers import call_budget

pytestmark = pytest.mark.anyio

IDLE_S = 0.05  # the idle timeout of these tests
SLOWER_S = 0.25  # a consumer's work between pieces, longer than the idle timeout


def budget(timeout: float = IDLE_S) -> CallBudget:
    return call_budget(timeout)


async def ready(count: int) -> AsyncIterator[int]:
    """``count`` pieces, each there at once."""
    for piece in range(count):
        yield piece


async def one_then_stall(waiting: anyio.Event | None = None) -> AsyncIterator[int]:
    """One piece, then nothing ever again (``waiting`` set once the stall starts)."""
    yield 0
    if waiting is not None:
        waiting.set()
    await anyio.Event().wait()
    yield 1  # never reached


def task_cancelling() -> int:
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling()


async def test_the_consumer_s_work_between_pieces_is_not_bounded_by_the_idle_timeout() -> None:
    calls, got = budget(), []
    pieces = ready(3)
    while True:
        try:
            got.append(await calls.next(pieces))
        except StopAsyncIteration:
            break
        await anyio.sleep(SLOWER_S)  # the consumer's code, between two waits
    assert got == [0, 1, 2]


async def test_an_answer_left_mid_way_cancels_nothing_afterwards() -> None:
    calls = budget()
    pieces = ready(3)
    assert await calls.next(pieces) == 0
    with anyio.fail_after(SLOWER_S * 20):
        await anyio.sleep(SLOWER_S)  # the idle timer rings now, and finds no wait under way
    assert task_cancelling() == 0


async def test_a_stalled_wait_times_out_and_leaves_the_task_uncancelled() -> None:
    calls = budget()
    pieces = one_then_stall()
    assert await calls.next(pieces) == 0
    with anyio.fail_after(SLOWER_S * 20), pytest.raises(ModelTimeoutError) as raised:
        await calls.next(pieces)
    assert raised.value.details == {"limit": "timeout", "seconds": IDLE_S}
    assert task_cancelling() == 0
    await anyio.sleep(SLOWER_S)  # nothing is left to cancel the task


async def test_a_cancellation_from_outside_during_a_wait_stays_a_cancellation() -> None:
    calls, waiting = budget(timeout=60.0), anyio.Event()
    pieces = one_then_stall(waiting)
    assert await calls.next(pieces) == 0
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_waiting() -> None:
                await waiting.wait()
                scope.cancel()

            tg.start_soon(cancel_when_waiting)
            await calls.next(pieces)
    assert scope.cancelled_caught
    assert task_cancelling() == 0


async def test_an_outside_cancellation_that_comes_with_the_timeout_wins() -> None:
    # the idle timer and a cancellation from outside reach the task in one loop iteration:
    # the wait ends cancelled, not timed out, as with asyncio.timeout()
    calls = budget(timeout=math.ulp(0.0))  # due at once: the timer rings in the next iteration
    task = asyncio.current_task()
    assert task is not None

    async def cancelled_from_outside() -> AsyncIterator[int]:
        asyncio.get_running_loop().call_soon(task.cancel)
        await anyio.Event().wait()
        yield 0  # never reached

    with pytest.raises(asyncio.CancelledError):
        await calls.next(cancelled_from_outside())
    assert task.uncancel() == 0  # the outside cancellation, still counted

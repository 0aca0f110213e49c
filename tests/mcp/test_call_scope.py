"""The scope around one upstream call (``ServerConnection.call_scope``): the connection's end
stops the call on asyncio and trio, in ``with`` and ``async with`` form, and any other
cancellation passes through it unchanged."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from sagents.mcp._call_scope import CallScope

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_the_connections_end_stops_a_call_waiting_in_async_with() -> None:
    scopes: set[CallScope] = set()
    entered = anyio.Event()
    reached_end: list[bool] = []

    async def call() -> None:
        async with CallScope(scopes) as scope:
            entered.set()
            await anyio.sleep_forever()
            reached_end.append(True)
        assert scope.cancelled_caught
        assert not scopes  # forgotten on exit

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await entered.wait()
            assert len(scopes) == 1
            for scope in list(scopes):
                scope.cancel()
                scope.cancel()  # a second abort changes nothing
    assert reached_end == []


async def test_the_connections_end_stops_a_call_in_the_sync_form() -> None:
    scopes: set[CallScope] = set()
    with anyio.fail_after(10):
        with CallScope(scopes) as scope:
            for each in list(scopes):
                each.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught


async def test_a_call_nobody_aborts_returns_normally() -> None:
    scopes: set[CallScope] = set()
    async with CallScope(scopes) as scope:
        await anyio.lowlevel.checkpoint()
    assert not scope.cancelled_caught
    assert not scopes


async def test_an_outer_cancellation_passes_through_the_call_scope() -> None:
    scopes: set[CallScope] = set()
    with anyio.fail_after(10), anyio.move_on_after(0.05) as outer:
        async with CallScope(scopes) as scope:
            await anyio.sleep_forever()
    assert outer.cancelled_caught
    assert not scope.cancelled_caught


async def test_an_abort_after_the_block_left_cancels_nothing_later() -> None:
    scopes: set[CallScope] = set()
    async with CallScope(scopes) as scope:
        scope.cancel()  # due at the next wait, but the block ends before it waits
    with anyio.fail_after(10):
        await anyio.sleep(0.01)  # not cancelled by the abort above
        await anyio.lowlevel.checkpoint()
    assert not scope.cancelled_caught


async def test_an_outer_cancellation_with_the_connections_end_is_not_lost() -> None:
    scopes: set[CallScope] = set()
    waited_on: list[bool] = []
    with anyio.fail_after(10):
        with anyio.CancelScope() as outer:
            async with CallScope(scopes):
                for each in list(scopes):
                    each.cancel()  # the connection ends ...
                outer.cancel()  # ... while the caller is cancelled too
                await anyio.sleep_forever()
            await anyio.lowlevel.checkpoint()  # the caller's cancellation still comes
            waited_on.append(True)
    assert outer.cancelled_caught
    assert waited_on == []

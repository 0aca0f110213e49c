"""Attacks on a bound call's flusher (started on first need on asyncio, beside the call on
trio)."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from sagents.core.events import Event, ToolProgressEvent
from sagents.progress import (
    EventQueue,
    ManualClock,
    ProgressHub,
    ProgressSettings,
    bind_tool_call,
    emit_tool_progress,
)

COUNT = 2000


def _waiting(queue: EventQueue) -> list[Event]:
    out: list[Event] = []
    while len(queue):
        out.append(queue.receive_nowait())
    return out


def _hub(clock: ManualClock) -> ProgressHub:
    return ProgressHub(settings=ProgressSettings(max_buffered=COUNT * 4), clock=clock)


async def _call(hub: ProgressHub, n: int, started: anyio.Event | None = None) -> None:
    async with bind_tool_call(hub, "s", f"c{n}"):
        await emit_tool_progress("a")
        await emit_tool_progress("b")  # waits for its window: the flusher starts
        if started is not None:
            started.set()
            await anyio.sleep_forever()


def _by_call(events: list[Event]) -> dict[str, tuple[str, int]]:
    found: dict[str, tuple[str, int]] = {}
    for event in events:
        assert isinstance(event, ToolProgressEvent)
        text, closed = found.get(event.tool_call_id, ("", 0))
        found[event.tool_call_id] = (text + event.text, closed + event.closed)
    return found


@pytest.mark.parametrize("cancelled", [False, True])
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_thousands_of_calls_ending_while_text_waits_send_it_and_leave_no_task(
    anyio_backend: str, cancelled: bool
) -> None:
    """Each call ends (or is cancelled) while its second text waits for its window."""
    clock = ManualClock()
    hub = _hub(clock)
    before = len(asyncio.all_tasks()) if anyio_backend == "asyncio" else 0
    async with hub.subscribe("s") as events:
        async with anyio.create_task_group() as tg:
            for n in range(COUNT):
                tg.start_soon(_call, hub, n, anyio.Event() if cancelled else None)
            if cancelled:
                await wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
        delivered = _waiting(events)
    assert _by_call(delivered) == {f"c{n}": ("ab", 1) for n in range(COUNT)}
    if anyio_backend == "asyncio":
        assert len(asyncio.all_tasks()) == before

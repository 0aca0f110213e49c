"""Where a run executes: in the task that iterates ``SAgent.run_stream`` (or awaits
``SAgent.run``), with a task of its own only where it needs concurrency.

A run is an async generator of events (``SAgent._run_events``) that holds no cancel scope, task
group or context variable across a ``yield`` (and closes each generator it iterates, so that
closing the run stops everything at once): each step enters them for its own ``await`` and
leaves them before the events go out. So the consumer's task can iterate it directly, and a text
turn pays no task switch for being an agent run (bench/bench_agent_loop.py). Two things need
more, and get it here:

- a batch of tool calls runs concurrently: :func:`relay` runs it in a task of its own while its
  events (approvals, progress, results) are passed on as they come;
- run_script's sandbox holds a task group for the whole run: :func:`in_task` iterates such a
  run in a task of its own, as every run once did.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import aclosing, asynccontextmanager
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from sagents.agent._events import AgentEvent
from sagents.agent._run import ActiveRun, running_loop
from sagents.progress._queue import EventQueue

__all__ = ["EVENT_BUFFER", "forwarding", "in_task", "relay"]

EVENT_BUFFER: Final = 256  # events waiting for a slow consumer before the run waits


async def relay(
    run: ActiveRun, work: Callable[[], Awaitable[None]]
) -> AsyncGenerator[AgentEvent, None]:
    """Run ``work`` (a batch of tool calls) in a task of its own and pass its events on as they
    come, with the progress its tools publish meanwhile; the events waiting before it go first.

    The batch is a step of the run (:attr:`ActiveRun.step`: its tools see the run's approver,
    questioner, session and span). The task is cancelled and awaited when the iterator is
    closed early (the batch settles its calls on the way out).

    Raises:
        RunCancelled: the run was cancelled meanwhile (the batch settled its calls first).
        Exception: what ``work`` raised (a bug).
    """
    for event in run.take():
        yield event

    async def batch(send: MemoryObjectSendStream[AgentEvent]) -> None:
        failure: Exception | None = None
        run.send = send
        with run.step():  # the run's context (approver, questioner...), cancellable
            async with forwarding(run):
                try:
                    await work()
                except Exception as error:  # noqa: BLE001 - raised below, not in a group
                    failure = error
        if failure is not None:
            raise failure

    try:
        async with aclosing(_from_task(batch)) as relayed:
            async for event in relayed:
                yield event
    finally:
        run.send = None


async def in_task(events: AsyncGenerator[AgentEvent, None]) -> AsyncGenerator[AgentEvent, None]:
    """Iterate ``events`` in a task of its own and pass them on: for a run that holds a task
    group for its whole length (run_script's sandbox), which must not span the consumer's
    ``yield``. The task is cancelled and awaited when the iterator is closed early.

    Raises:
        Exception: what iterating ``events`` raised (a bug).
    """

    async def pump(send: MemoryObjectSendStream[AgentEvent]) -> None:
        async with aclosing(events):
            async for event in events:
                await send.send(event)

    async with aclosing(_from_task(pump)) as relayed:
        async for event in relayed:
            yield event


async def _from_task(
    body: Callable[[MemoryObjectSendStream[AgentEvent]], Coroutine[Any, Any, None]],
) -> AsyncGenerator[AgentEvent, None]:
    """The events ``body`` sends, as they come, from a task this generator owns (started here,
    cancelled and awaited in its finally), not from a task group entered here: a task group
    spanning a ``yield`` would corrupt the consumer's cancel scopes when it leaves the loop
    with ``break``.

    Raises:
        Exception: what ``body`` raised.
    """
    send, receive = anyio.create_memory_object_stream[AgentEvent](EVENT_BUFFER)

    async def sending() -> None:
        async with send:
            await body(send)

    task = running_loop().create_task(sending())
    try:
        async with receive:
            while True:
                try:
                    # what waits is taken without a checkpoint: one task switch less per
                    # event (bench/bench_agent_loop.py); the wait below is one when none does
                    event = receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        event = await receive.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                yield event
    finally:
        send.close()
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([task])
    if not task.cancelled() and (failure := task.exception()) is not None:
        raise failure


@asynccontextmanager
async def forwarding(run: ActiveRun) -> AsyncIterator[None]:
    """Forward the run's progress events as they come while the body (a batch of tool calls)
    runs. Outside a batch none is needed: the run takes what waits before each of its events
    (:meth:`ActiveRun.take`)."""
    async with anyio.create_task_group() as tg:
        for queue in run.queues:
            tg.start_soon(_forward, run, queue)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def _forward(run: ActiveRun, queue: EventQueue) -> None:
    while True:
        await queue.wait_ready()
        if queue.closed and not len(queue):
            return
        await run.drain()

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
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from contextlib import aclosing
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from sagents.agent._events import AgentEvent
from sagents.agent._run import EVENT_BUFFER, ActiveRun, running_loop
from sagents.core.events import Event
from sagents.progress._queue import EventQueue

__all__ = ["in_task", "listen", "relay", "unlisten"]


async def relay(
    run: ActiveRun, work: Callable[[], Awaitable[None]]
) -> AsyncGenerator[AgentEvent, None]:
    """Run ``work`` (a batch of tool calls) in a task of its own and pass its events on as they
    come, with the progress its tools publish meanwhile; the events waiting before it go first.

    The batch is a step of the run (:attr:`ActiveRun.step`: its tools see the run's approver,
    questioner, session and span). The task is cancelled and awaited when the iterator is
    closed early (the batch settles its calls on the way out).

    The batch's events wait in the run's outbox and its progress in the run's queues, as
    outside a batch; the run's bell (:meth:`ActiveRun.ring`, rung by both) wakes this
    generator to take them. No memory stream, and no forwarding task per progress queue: those
    were most of a tool turn's own cost (bench/bench_agent_loop.py).

    Raises:
        RunCancelled: the run was cancelled meanwhile (the batch settled its calls first).
        ConsumerLaggedError: a progress queue of the run lagged meanwhile (the consumer took
            nothing for too long, :attr:`ActiveRun.lagged`): raised once the batch's results
            went out.
        Exception: what ``work`` raised (a bug).
    """
    for event in run.take():
        yield event

    async def batch() -> None:
        with run.step():  # the run's context (approver, questioner...), cancellable
            await work()

    bell = run.bell = asyncio.Event()  # the driver's own: cleared and rung, a batch long
    task = running_loop().create_task(batch())
    task.add_done_callback(lambda _task: run.ring())
    try:
        while True:
            bell.clear()  # rung by what comes from here on (also while the events go out)
            for event in run.take():
                yield event
            if task.done():
                break
            await bell.wait()
        for event in run.take():  # what the batch's end left (its results came before it)
            yield event
    finally:
        run.bell = None  # an event emitted from now on waits for the run's next take
        if not task.done():
            # A call waiting for room (ActiveRun.emit) is not woken: it waits on until the
            # cancellation reaches it, also down a sub-agent's run, and never goes on (asks the
            # approver, runs its tool) for a consumer that has gone.
            await _cancelled(task)
        failure = _failure(task)
    if failure is not None:
        raise failure
    if run.lagged is not None:  # the batch settled, its events went out: the run ends here
        raise run.lagged


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
            await _cancelled(task)
        failure = _failure(task)
    if failure is not None:
        raise failure


async def _cancelled(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for its end, whatever cancels the caller meanwhile."""
    task.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait([task])


def _failure(task: asyncio.Task[None]) -> BaseException | None:
    """What the ended ``task`` raised, if anything but its cancellation: taken also when the
    consumer left (then not raised), so that asyncio never reports it as never retrieved."""
    return None if task.cancelled() else task.exception()


def listen(run: ActiveRun) -> None:
    """Register the run's progress queue on each of its hubs, once (as
    :meth:`ProgressHub.subscribe` registers one, with a queue that rings the run's bell as
    progress comes: :func:`relay`): before the run's first batch of tool calls, or before
    its sandbox opens, which is what publishes progress for the session; a text turn
    registers none (bench/bench_agent_loop.py --calls). :func:`unlisten` unregisters them."""
    if run.queues:
        return
    for hub in run.hubs:
        queue = _RunQueue(run, max_buffered=hub.settings.max_buffered)
        hub.register_progress_queue(run.session.session_id, queue)
        run.queues.append(queue)


def unlisten(run: ActiveRun) -> None:
    """Unregister the run's progress queues, if :func:`listen` registered them (the run
    ended)."""
    if not run.queues:
        return  # none registered (and no hubs looked up for it)
    for hub, queue in zip(run.hubs, run.queues, strict=False):  # those registered
        hub.unregister_progress_queue(run.session.session_id, queue)
    run.queues.clear()  # each refers to the run: no cycle left for the garbage collector


class _RunQueue(EventQueue):
    """A run's progress queue: each event offered rings the run's bell."""

    def __init__(self, run: ActiveRun, *, max_buffered: int) -> None:
        super().__init__(max_buffered=max_buffered)
        self._run = run

    def offer(self, event: Event) -> bool:
        queued = super().offer(event)
        self._run.ring()
        return queued

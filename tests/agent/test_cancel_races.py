"""Races of a model call's timers (docs/agent.md, "The model seam"): the idle timer of a
streamed answer (``CallBudget.next``) ringing in the same loop iteration as a piece, as a
cancellation from outside, or as ``SAgent.cancel``. Each is made deterministic with a timer
due at once (``math.ulp(0.0)`` seconds) and callbacks ordered in one loop iteration: no
timed waits."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from sagents.agent import (
    DoneEvent,
    Finish,
    Message,
    MessageDeltaEvent,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    SAgent,
    TextDelta,
    TextPart,
)
from sagents.agent._retry import CallBudget
from sagents.errors import ModelTimeoutError
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import ToolManager
from tests.agent.helpers import RUN_TIMEOUT_S, call_budget, collect, done_of

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]
DUE_AT_ONCE = math.ulp(0.0)  # an idle timeout whose timer rings in the next loop iteration


def budget(timeout: float = DUE_AT_ONCE) -> CallBudget:
    return call_budget(timeout)


def this_task() -> asyncio.Task[object]:
    task = asyncio.current_task()
    assert task is not None
    return task


async def later_work_is_not_cancelled() -> None:
    """Some loop iterations of work after the answer: a stray cancellation would land here."""
    loop = asyncio.get_running_loop()
    done = anyio.Event()
    with anyio.fail_after(RUN_TIMEOUT_S):
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        loop.call_later(0.01, done.set)  # the timer's next ring, if one were left, is due first
        await done.wait()


class ArrivesWithTheTimer:
    """A piece that arrives in the same loop iteration as the idle timer rings: the callback
    that delivers it is scheduled with the timer's own deadline (after it, for ``after``)."""

    def __init__(self, *, after: bool, swallow: bool) -> None:
        self.after = after
        self.swallow = swallow

    def __aiter__(self) -> ArrivesWithTheTimer:
        return self

    async def __anext__(self) -> str:
        loop = asyncio.get_running_loop()
        piece: asyncio.Future[str] = loop.create_future()

        def deliver() -> None:
            if not piece.done():
                piece.set_result("piece")

        if self.after:  # the timer (due already) rings first, then the piece comes
            loop.call_at(loop.time(), deliver)
        else:  # the piece comes first, then the timer rings, both before the task runs
            loop.call_soon(deliver)
        try:
            return await piece
        except asyncio.CancelledError:
            if not self.swallow:
                raise
            return "swallowed"  # never do this: some streams do


@pytest.mark.parametrize("after", [False, True], ids=["piece-first", "timer-first"])
@pytest.mark.parametrize("swallow", [False, True], ids=["raises", "swallows"])
async def test_a_piece_arriving_as_the_idle_timer_rings_leaves_no_cancellation_behind(
    after: bool, swallow: bool
) -> None:
    calls = budget()
    try:
        got: str | None = await calls.next(ArrivesWithTheTimer(after=after, swallow=swallow))
    except ModelTimeoutError:
        got = None  # the wait was overdue: a timeout, as asyncio.timeout() would say
    assert got in (None, "piece", "swallowed")
    assert this_task().cancelling() == 0
    await later_work_is_not_cancelled()


class TimesOutAsCancelled:
    """A model that reads its answer through a CallBudget (as every adapter does) whose wait
    times out in the loop iteration in which ``cancel`` is called (the timer first)."""

    model = "times-out-as-cancelled"

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.cancel = cancel

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[ModelEvent]:
        calls = budget()
        cancel = self.cancel

        class Pieces:
            def __aiter__(self) -> Pieces:
                return self

            async def __anext__(self) -> str:
                loop = asyncio.get_running_loop()
                loop.call_at(loop.time(), cancel)  # after the idle timer, same iteration
                await loop.create_future()
                raise AssertionError("never answered")

        yield TextDelta(text=await calls.next(Pieces()))
        yield Finish(
            response=ModelResponse(message=Message(role="assistant", parts=(TextPart(text=""),)))
        )

    async def aclose(self) -> None:
        pass


async def test_a_cancel_landing_with_the_idle_timeout_ends_the_run_cancelled() -> None:
    agents: list[SAgent] = []
    agent = SAgent(model=TimesOutAsCancelled(lambda: agents[0].cancel()), run_script=False)
    agents.append(agent)
    with anyio.fail_after(RUN_TIMEOUT_S):
        done = done_of(await collect(agent, USER, tool_manager=ToolManager()))
    assert done.reason == "cancelled", done.error
    assert list(done.messages) == USER
    assert this_task().cancelling() == 0


class Stalls:
    """A wait that never ends; ``on_wait`` runs as it starts (the idle timer is set then)."""

    def __init__(self, on_wait: Callable[[asyncio.AbstractEventLoop], object]) -> None:
        self.on_wait = on_wait

    def __aiter__(self) -> Stalls:
        return self

    async def __anext__(self) -> str:
        loop = asyncio.get_running_loop()
        self.on_wait(loop)
        await loop.create_future()
        raise AssertionError("never answered")


async def test_an_anyio_scope_cancelled_as_the_idle_timer_rings_catches_its_cancellation() -> None:
    # anyio.move_on_after around the consumer, its deadline passing just before the idle timer
    # rings, in the same loop iteration: the scope's cancellation wins and is the scope's to
    # catch. (The other order, the timer first, ends with the timeout, as asyncio.timeout()
    # does: anyio delivers no cancellation of its own to a task whose wait is cancelled.)
    calls = budget()
    with anyio.CancelScope() as scope:
        await calls.next(Stalls(lambda loop: loop.call_soon(scope.cancel)))
    assert scope.cancelled_caught
    assert this_task().cancelling() == 0
    await later_work_is_not_cancelled()


class HangingMidRead:
    """A model whose read awaits an answer that never comes, after a first piece (lets the
    cancellation through; ``closed`` once its stream was closed)."""

    model = "hanging"

    def __init__(self) -> None:
        self.awaiting = anyio.Event()
        self.closed = anyio.Event()

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[ModelEvent]:
        try:
            yield TextDelta(text="first ")
            self.awaiting.set()
            await anyio.sleep_forever()
        finally:
            self.closed.set()

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("cancelled", ["outer", "inner", "one-agent"])
async def test_cancelling_a_run_whose_agent_tool_reads_an_answer(cancelled: str) -> None:
    # an agent used as a tool (SAgent.as_tool): its run reads its model's answer in the
    # caller's tool call. Cancelling the caller ends both; cancelling the sub-agent ends its
    # run as cancelled, which the caller gets as the tool's result and goes on; one agent
    # that is its own tool is cancelled in both of its runs.
    inner_model = HangingMidRead()
    sub_run_asked = anyio.Event()
    bodies = 0

    def step(body: dict[str, Any]) -> ScriptedReply:
        nonlocal bodies
        bodies += 1
        if bodies == 1:
            return tool_call("helper", {"task": "wait"}, id="c1")
        if cancelled == "one-agent" and bodies == 2:  # the sub-run's call: it stalls
            sub_run_asked.set()
            return reply("a long answer " * 8, hang_after_chunks=2)
        return reply("went on")

    async with ScriptedModel(step, api="anthropic") as server:
        outer = SAgent(model=server.chat_model(), run_script=False)
        helper = outer if cancelled == "one-agent" else SAgent(model=inner_model, run_script=False)
        manager = ToolManager()
        manager.register_tool(helper.as_tool("helper", "Helps."))
        async with anyio.create_task_group() as tg:

            async def cancel() -> None:
                if cancelled == "one-agent":
                    await sub_run_asked.wait()
                else:
                    await inner_model.awaiting.wait()
                (helper if cancelled == "inner" else outer).cancel()

            tg.start_soon(cancel)
            with anyio.fail_after(RUN_TIMEOUT_S):
                done = done_of(await collect(outer, USER, tool_manager=manager))
    if cancelled == "inner":
        assert done.reason == "stop", done.error
        assert done.messages[-1]["content"] == "went on"
    else:
        assert done.reason == "cancelled", done.error
    if cancelled != "one-agent":
        assert inner_model.closed.is_set()
    assert this_task().cancelling() == 0


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic", "gemini"])
async def test_one_cancel_ends_every_run_of_the_agent_each_mid_read(api: str) -> None:
    # three runs of one agent (one adapter) at once, each awaiting the rest of its answer
    runs = 3
    stalling = ScriptedReply(content="a long answer " * 10, hang_after_chunks=8)
    async with ScriptedModel(lambda body: stalling, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(timeout=60.0), run_script=False)
        reading = [anyio.Event() for _ in range(runs)]
        dones: list[DoneEvent] = []

        async def run(index: int) -> None:
            async with aclosing(agent.run_stream(USER, tool_manager=ToolManager())) as events:
                async for event in events:
                    if isinstance(event, MessageDeltaEvent):
                        reading[index].set()
                    elif isinstance(event, DoneEvent):
                        dones.append(event)

        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for index in range(runs):
                    tg.start_soon(run, index)
                for started in reading:
                    await started.wait()
                agent.cancel()
    assert [done.reason for done in dones] == ["cancelled"] * runs
    assert all(list(done.messages) == USER for done in dones)
    assert this_task().cancelling() == 0

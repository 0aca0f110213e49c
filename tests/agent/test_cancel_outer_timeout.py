"""``SAgent.cancel()`` landing in the same event loop iteration as an ``asyncio.timeout()``
around the consumer (docs/agent.md, "Cancellation"): the timeout's cancellation is the
consumer's (its ``TimeoutError``), the run's own is taken back, and no cancellation is left
on the task for code after it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

import anyio
import anyio.lowlevel
import pytest

from sagents.agent import AgentEvent, ModelEvent, ModelRequest, SAgent, TextDelta
from sagents.tool import ToolManager
from tests.agent.helpers import RUN_TIMEOUT_S

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]


class Hanging:
    """A model whose read awaits an answer that never comes, after a first piece."""

    model = "hanging"

    def __init__(self) -> None:
        self.awaiting = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(text="first ")
        self.awaiting.set()
        await asyncio.get_running_loop().create_future()
        raise AssertionError("never answered")

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("first", ["agent", "timeout"])
async def test_an_outer_asyncio_timeout_expiring_with_the_cancel_raises_its_timeout(
    first: str,
) -> None:
    model = Hanging()
    agent = SAgent(model=model, run_script=False)
    loop = asyncio.get_running_loop()
    events: list[AgentEvent] = []
    task = asyncio.current_task()
    assert task is not None
    before = task.cancelling()
    helpers: list[asyncio.Task[None]] = []

    async def consume() -> None:
        async with asyncio.timeout(None) as outer:

            async def both() -> None:
                await model.awaiting.wait()  # the run's read awaits the rest of the answer
                if first == "agent":
                    agent.cancel()
                    outer.reschedule(loop.time())
                else:
                    outer.reschedule(loop.time())
                    loop.call_soon(agent.cancel)  # in the iteration the timeout expires in

            helpers.append(asyncio.create_task(both()))
            async with aclosing(agent.run_stream(USER, tool_manager=ToolManager())) as run:
                async for event in run:
                    events.append(event)

    with anyio.fail_after(RUN_TIMEOUT_S), pytest.raises(TimeoutError):
        await consume()
    await helpers[0]
    assert [type(e).__name__ for e in events] == ["MessageDeltaEvent"]
    assert task.cancelling() == before
    for _ in range(5):  # a stray cancellation would land here
        await anyio.lowlevel.checkpoint()

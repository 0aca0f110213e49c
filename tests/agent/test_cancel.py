"""``SAgent.cancel`` at each point of a model call, with models that answer from memory: before
the first read of the answer, between its pieces, while a read awaits (called from another
task), and with a model that swallows the cancellation of its read. Each run ends with
``done(reason="cancelled")`` and keeps no part of the cancelled answer; the consumer's own
cancellation landing with it stays the consumer's. The same on every adapter's wire format:
``test_conformance.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

import anyio
import pytest

from sagents.agent import (
    AgentEvent,
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
from sagents.errors import ModelError
from sagents.tool import ToolManager
from tests.agent.helpers import (
    RUN_TIMEOUT_S,
    HangingModel,
    collect,
    collect_cancelling_at_first_text,
    done_of,
)

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]
PIECES = ("a ", "long ", "answer ", "in ", "pieces")


def answer(text: str) -> Finish:
    return Finish(
        response=ModelResponse(message=Message(role="assistant", parts=(TextPart(text=text),)))
    )


class Ready:
    """A model whose answer is all there: its pieces come without a wait. ``on_stream`` runs
    when the loop asks for the answer, before it reads any of it."""

    model = "ready"

    def __init__(self, on_stream: Callable[[], None] = lambda: None) -> None:
        self.on_stream = on_stream
        self.read = 0
        self.closed = False

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.on_stream()
        return self._events()

    async def _events(self) -> AsyncIterator[ModelEvent]:
        try:
            for piece in PIECES:
                self.read += 1
                yield TextDelta(text=piece)
            yield answer("".join(PIECES))
        finally:
            self.closed = True

    async def aclose(self) -> None:
        pass


class Swallowing:
    """A model whose read awaits an answer that never comes and swallows the cancellation of
    that wait; then ``after`` says what it does: ``answer`` (a piece and a finish), ``end``
    (the stream ends without a finish) or ``fail`` (a ModelError)."""

    model = "swallowing"

    def __init__(self, after: str) -> None:
        self.after = after
        self.awaiting = anyio.Event()
        self.swallowed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(text="first ")
        try:
            self.awaiting.set()
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.swallowed = True  # never do this: shown here because some models do
        if self.after == "answer":
            yield TextDelta(text="more")
            yield answer("first more")
        elif self.after == "fail":
            raise ModelError("the read was interrupted")

    async def aclose(self) -> None:
        pass


async def cancelled_from_another_task(agent: SAgent, awaiting: anyio.Event) -> list[AgentEvent]:
    """The events of a run that another task cancels once ``awaiting`` is set."""
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await awaiting.wait()
            agent.cancel()

        tg.start_soon(cancel)
        events = await collect(agent, USER, tool_manager=ToolManager())
    return events


async def test_a_cancel_before_the_first_read_ends_the_run_without_reading_the_answer() -> None:
    agents: list[SAgent] = []
    model = Ready(on_stream=lambda: agents[0].cancel())  # asked for, not read yet
    agents.append(SAgent(model=model, run_script=False))
    done = done_of(await collect(agents[0], USER, tool_manager=ToolManager()))
    assert done.reason == "cancelled"
    assert list(done.messages) == USER
    assert model.read == 0  # its generator never started


async def test_a_cancel_between_pieces_that_need_no_wait_ends_the_run_at_the_next_read() -> None:
    model = Ready()
    agent = SAgent(model=model, run_script=False)
    events = await collect_cancelling_at_first_text(agent, USER, tool_manager=ToolManager())
    done = done_of(events)
    assert done.reason == "cancelled"
    assert list(done.messages) == USER
    assert [e.delta for e in events if isinstance(e, MessageDeltaEvent)] == ["a "]
    assert model.read == 1  # nothing read after the cancel
    assert model.closed


@pytest.mark.parametrize("after", ["answer", "end", "fail"])
async def test_a_cancel_while_a_read_awaits_ends_cancelled_even_if_the_model_swallows_it(
    after: str,
) -> None:
    model = Swallowing(after)
    agent = SAgent(model=model, run_script=False)
    done = done_of(await cancelled_from_another_task(agent, model.awaiting))
    assert model.swallowed
    assert done.reason == "cancelled"
    assert list(done.messages) == USER


@pytest.mark.parametrize("agent_first", [True, False], ids=["agent-first", "consumer-first"])
async def test_the_consumers_own_cancellation_is_not_taken_for_the_runs(agent_first: bool) -> None:
    model = HangingModel()
    agent = SAgent(model=model, run_script=False)
    events: list[AgentEvent] = []
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as consumer:

                async def cancel_both() -> None:
                    await model.awaiting.wait()  # the run's task awaits in the read now
                    if agent_first:
                        agent.cancel()
                    consumer.cancel()
                    if not agent_first:
                        agent.cancel()

                tg.start_soon(cancel_both)
                async with aclosing(agent.run_stream(USER, tool_manager=ToolManager())) as run:
                    async for event in run:
                        events.append(event)
    assert consumer.cancelled_caught  # the consumer's cancellation reached it
    assert not any(isinstance(e, DoneEvent) for e in events)

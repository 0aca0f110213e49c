"""The agent loop runs on asyncio (docs/architecture.md, "Event loops"): a run started on
another event loop says so, before any event, rather than failing as a bug of sagents."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from sagents.agent import (
    Finish,
    Message,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    SAgent,
    TextDelta,
    TextPart,
)
from sagents.tool import ToolManager


class Answers:
    """A model that needs no event loop of its own (ScriptedModel's server runs on asyncio)."""

    model = "answers"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(text="hi")
        message = Message(role="assistant", parts=(TextPart(text="hi"),))
        yield Finish(response=ModelResponse(message=message))

    async def aclose(self) -> None:
        pass


def test_a_run_started_on_trio_says_the_loop_runs_on_asyncio() -> None:
    events: list[object] = []

    async def on_trio() -> None:
        agent = SAgent(model=Answers(), run_script=False)
        user = [{"role": "user", "content": "hello"}]
        async for event in agent.run_stream(user, tool_manager=ToolManager()):
            events.append(event)

    with pytest.raises(RuntimeError, match="runs on asyncio"):
        anyio.run(on_trio, backend="trio")
    assert events == []

"""What a run leaves behind for the garbage collector: nothing of the loop's own. A reference
cycle among a run's objects (the run and its steps, a model call and its reader) is freed only
by a collection, which a process serving many runs then pays for (bench/bench_agent_loop.py:
text turns); real SDK clients against ``ScriptedModel``, on every API, streamed and whole."""

from __future__ import annotations

import gc

import pytest

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, reply
from sagents.tool import ToolManager, tool

pytestmark = pytest.mark.anyio

RUNS = 3


@tool(permission="read_only")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic", "gemini"])
async def test_a_text_run_leaves_no_reference_cycle_of_the_loops_objects(
    api: str, stream: bool
) -> None:
    manager = ToolManager()
    manager.register_tool(lookup)  # offered: the tool export path runs too
    replies = [reply("The answer.") for _ in range(RUNS + 1)]
    async with ScriptedModel(replies, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(stream=stream), run_script=False)
        first = await agent.run([{"role": "user", "content": "hello"}], tool_manager=manager)
        assert first.output == "The answer."
        gc.collect()  # what came before is not counted
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable is kept in gc.garbage
        try:
            for _ in range(RUNS):
                result = await agent.run(
                    [{"role": "user", "content": "hello"}], tool_manager=manager
                )
                assert result.reason == "stop"
            gc.collect()
            ours = sorted(
                type(found).__qualname__
                for found in gc.garbage
                if type(found).__module__.startswith("sagents.")
            )
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert ours == []

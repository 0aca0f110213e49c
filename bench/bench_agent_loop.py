"""The agent loop's own overhead per turn, against the bare ``openai`` client call.

Run: ``.venv/bin/python bench/bench_agent_loop.py``. Both sides talk to the same scripted model
server (``sagents.testing.ScriptedModel``) on 127.0.0.1 in the same run:

- baseline: ``AsyncOpenAI.chat.completions.create(stream=True)`` and reading every chunk;
- text turn: one ``SAgent.run_stream`` run whose model answers with text (one model call);
- tool turn: one run with one local tool call (two model calls), against two bare calls.

Prints the median CPU milliseconds per turn and the ratios (not a test; numbers vary with
load). The server runs in this process, so its time is in both sides.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import anyio
from openai import AsyncOpenAI

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import ToolManager, tool

TURNS = 30
REPEATS = 5
TEXT = "The answer is forty-two, as computed by the scripted model. " * 4


@tool(permission="read_only")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _script(body: dict[str, Any]) -> ScriptedReply:
    wants_tool = any("use the tool" in str(m.get("content")) for m in body["messages"])
    if wants_tool and body["messages"][-1]["role"] != "tool":
        return tool_call("lookup", {"key": "k"})
    return reply(TEXT)


async def _median_ms(turn: Callable[[], Awaitable[None]]) -> float:
    """Median over REPEATS of the mean CPU time of one turn, in milliseconds.

    CPU time of this process (``time.process_time``: client, loop and server together), which
    a shared, loaded machine disturbs far less than wall time does.
    """
    runs = []
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(TURNS):
            await turn()
        runs.append((time.process_time() - start) / TURNS * 1000)
    return statistics.median(runs)


async def main() -> None:
    async with ScriptedModel(_script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        model = server.chat_model()
        agent = SAgent(model=model, run_script=False)
        manager = ToolManager()
        manager.register_tool(lookup)
        text_messages = [{"role": "user", "content": "hello"}]
        tool_messages = [{"role": "user", "content": "use the tool"}]

        async def bare_call() -> None:
            stream = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hello"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _chunk in stream:
                pass

        async def bare_two_calls() -> None:
            await bare_call()
            await bare_call()

        def agent_turn(messages: list[dict[str, Any]]) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                async with aclosing(agent.run_stream(messages, tool_manager=manager)) as events:
                    async for _event in events:
                        pass

            return run

        await bare_call()  # warm up both paths
        await agent_turn(text_messages)()
        bare = await _median_ms(bare_call)
        text = await _median_ms(agent_turn(text_messages))
        bare2 = await _median_ms(bare_two_calls)
        tool_turn = await _median_ms(agent_turn(tool_messages))
        await client.close()
    print(f"bare openai call (stream):       {bare:7.2f} ms")
    print(f"SAgent text turn (1 model call): {text:7.2f} ms   ratio {text / bare:5.2f}x")
    print(f"two bare calls:                  {bare2:7.2f} ms")
    print(f"SAgent tool turn (2 calls+tool): {tool_turn:7.2f} ms   ratio {tool_turn / bare2:5.2f}x")
    print(f"loop overhead per text turn:     {text - bare:7.2f} ms")


if __name__ == "__main__":
    anyio.run(main)

"""The peers' side of ``bench/bench_agent_loop.py --peers``: a text turn and a tool turn through
pydantic-ai's ``Agent`` and the OpenAI Agents SDK's ``Runner``, against the scripted model server
the parent started (Chat Completions, in its own process).

Runs in ``bench/.venv-peers`` (``bench/setup-peers.sh``), never in the project's venv. Usage::

    bench/.venv-peers/bin/python bench/peers/agent_loop_peers.py BASE_URL TURNS REPEATS

The server answers a request asking to "use the tool" with a call of ``lookup`` until the
request holds its result, and anything else with text. Prints one JSON object:
``{"pydantic-ai Agent": {"stream": {"text": ms, "tool": ms}, "whole": {...}}, "OpenAI Agents
Runner": {...}}``, the
median CPU milliseconds (``time.process_time``, this process only: the server runs elsewhere)
of one turn.

``--rss NAME`` (``bench/bench_agent_memory.py``): instead, one process per peer imports it,
runs a streamed text turn and a streamed tool turn, and prints this process's peak resident set
size in MB (``ru_maxrss``).
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

WARMUP = 3
Turn = Callable[[str], Awaitable[None]]


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def _median_ms(turn: Turn, prompt: str, turns: int, repeats: int) -> float:
    for _ in range(WARMUP):
        await turn(prompt)
    runs = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(turns):
            await turn(prompt)
        runs.append((time.process_time() - start) / turns * 1000)
    return statistics.median(runs)


def _pydantic_ai(base_url: str, stream: bool) -> Turn:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url=base_url, api_key="bench"))
    agent = Agent(model, tools=[lookup])

    async def turn(prompt: str) -> None:
        if not stream:
            await agent.run(prompt)
            return
        async with agent.run_stream(prompt) as result:
            async for _text in result.stream_text(delta=True):
                pass

    return turn


def _openai_agents(base_url: str, stream: bool) -> Turn:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    agent: Agent[Any] = Agent(
        name="bench",
        model=OpenAIChatCompletionsModel(model="m", openai_client=client),
        tools=[function_tool(lookup)],
    )

    async def turn(prompt: str) -> None:
        if not stream:
            await Runner.run(agent, prompt)
            return
        result = Runner.run_streamed(agent, prompt)
        async for _event in result.stream_events():
            pass

    return turn


async def main() -> None:
    base_url, turns, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    results: dict[str, dict[str, dict[str, float]]] = {}
    makers = (("pydantic-ai Agent", _pydantic_ai), ("OpenAI Agents Runner", _openai_agents))
    for name, make in makers:
        for stream in (True, False):
            mode = "stream" if stream else "whole"
            turn = make(base_url, stream)
            text = await _median_ms(turn, "hello", turns, repeats)
            tool = await _median_ms(turn, "use the tool", turns, repeats)
            results.setdefault(name, {})[mode] = {"text": text, "tool": tool}
    print(json.dumps(results))


async def peak_rss(name: str, base_url: str) -> None:
    make = {"pydantic-ai Agent": _pydantic_ai, "OpenAI Agents Runner": _openai_agents}[name]
    turn = make(base_url, True)
    await turn("hello")
    await turn("use the tool")
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    if sys.argv[1] == "--rss":
        anyio.run(peak_rss, sys.argv[2], sys.argv[3])
    else:
        anyio.run(main)

"""The peers' side of ``bench/bench_tool_dispatch.py``: one trivial tool through each peer.

Runs in ``bench/.venv-peers`` (``bench/setup-peers.sh``), never in the project's venv, so that
the peers' dependencies cannot change sagents' own. Usage::

    bench/.venv-peers/bin/python bench/peers/tool_dispatch_peers.py CALLS

Prints one JSON object: ``{"pydantic-ai FunctionToolset": us_per_call, ...}`` with the CPU time
(``time.process_time``) of one call in microseconds, measured as sagents' side measures it: the
arguments validated against the tool's schema, the function called, the result returned.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

WARMUP = 200


async def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


async def _per_call_us(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    for _ in range(WARMUP):
        await call()
    start = time.process_time()
    for _ in range(calls):
        await call()
    return (time.process_time() - start) / calls * 1e6


async def _pydantic_ai(calls: int) -> float:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    toolset = FunctionToolset([add])
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    tools = await toolset.get_tools(ctx)
    tool = tools["add"]
    arguments = {"a": 1, "b": 2}

    async def call() -> Any:
        # What pydantic-ai's ToolManager does per call: validate, then call the toolset.
        validated = tool.args_validator.validate_python(arguments)
        result = await toolset.call_tool("add", validated, ctx, tool)
        assert result == 3
        return result

    return await _per_call_us(call, calls)


async def _openai_agents(calls: int) -> float:
    from agents import RunContextWrapper, function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(add)
    arguments = json.dumps({"a": 1, "b": 2})

    async def call() -> Any:
        ctx = ToolContext(
            context=None, tool_name="add", tool_call_id="call_1", tool_arguments=arguments
        )
        result = await tool.on_invoke_tool(ctx, arguments)
        assert result == 3, result
        return result

    del RunContextWrapper
    return await _per_call_us(call, calls)


async def main(calls: int) -> None:
    figures = {
        "pydantic-ai FunctionToolset": await _pydantic_ai(calls),
        "openai-agents FunctionTool": await _openai_agents(calls),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 2000)

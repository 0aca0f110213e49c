"""Dispatch overhead of ``ToolManager.run_tool`` and the cost of ``get_openai_tools()``.

Run: ``.venv/bin/python bench/bench_tool_dispatch.py``. Prints per-call microseconds and ratios
against baselines measured in the same run (not a test; numbers vary with machine load).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from sagents.core.result import ToolResult
from sagents.core.spec import ToolSpec
from sagents.tool import ToolCall, ToolManager, ToolProxy

CALLS = 2000
REPEATS = 5
TOOLS = 2000


async def add(a: int, b: int = 1) -> int:
    return a + b


def add_sync(a: int, b: int = 1) -> int:
    return a + b


async def _per_call_us(call: Callable[[], Awaitable[Any]]) -> float:
    """Median over REPEATS of the mean CPU time of one call, in microseconds.

    CPU time of this process (``time.process_time``), which a shared, loaded machine disturbs
    far less than wall time does; it includes worker threads.
    """
    runs = []
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(CALLS):
            await call()
        runs.append((time.process_time() - start) / CALLS * 1e6)
    return statistics.median(runs)


class _Answer:
    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_text("ok")


def _spec(i: int) -> ToolSpec:
    return ToolSpec(
        name=f"server{i % 20}__tool_{i}",
        description=f"Tool number {i}: does something useful with its arguments.",
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "minimum": 1, "default": 10},
                "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
            },
            "required": ["query"],
            "$defs": {
                "Filter": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "value": {"type": "string"}},
                    "required": ["field", "value"],
                }
            },
        },
    )


async def dispatch() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    tm.register_tool(add_sync)
    proxy = ToolProxy([tm], available_tools=["add"])
    direct = await _per_call_us(lambda: add(a=1, b=2))
    via_manager = await _per_call_us(lambda: tm.run_tool("add", {"a": 1, "b": 2}))
    via_json = await _per_call_us(lambda: tm.run_tool("add", '{"a": "1", "b": 2}'))
    via_proxy = await _per_call_us(lambda: proxy.run_tool("add", {"a": 1, "b": 2}))
    sync_tool = await _per_call_us(lambda: tm.run_tool("add_sync", {"a": 1, "b": 2}))
    print(f"direct call of the async function:   {direct:9.2f} us/call CPU (baseline)")
    for label, value in [
        ("run_tool, dict arguments", via_manager),
        ("run_tool, JSON text + coercion", via_json),
        ("ToolProxy.run_tool", via_proxy),
        ("run_tool, sync tool (worker thread)", sync_tool),
    ]:
        print(f"{label + ':':37} {value:9.2f} us/call CPU  ratio {value / direct:8.1f}x")


def export() -> None:
    specs = [_spec(i) for i in range(TOOLS)]
    start = time.perf_counter()
    tm = ToolManager()
    for spec in specs:
        tm.register_tool((spec, _Answer()))
    register_s = time.perf_counter() - start

    start = time.perf_counter()
    baseline_text = json.dumps([dict(s.input_schema) for s in specs])
    json.loads(baseline_text)
    baseline_s = time.perf_counter() - start

    start = time.perf_counter()
    tools = tm.get_openai_tools()
    first_s = time.perf_counter() - start
    cached = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        tm.get_openai_tools(strict=False)
        cached.append(time.perf_counter() - start)
    cached_s = statistics.median(cached)
    assert len(tools) == TOOLS
    print(f"register {TOOLS} (spec, handler) tools:  {register_s * 1e3:9.1f} ms")
    print(f"baseline: json.dumps + loads of the {TOOLS} schemas: {baseline_s * 1e3:9.1f} ms")
    print(
        f"get_openai_tools(), first call:  {first_s * 1e3:9.1f} ms  "
        f"ratio {first_s / baseline_s:6.1f}x"
    )
    print(
        f"get_openai_tools(), cached:      {cached_s * 1e3:9.1f} ms  "
        f"ratio {cached_s / baseline_s:6.1f}x"
    )


def main() -> None:
    anyio.run(dispatch)
    export()


if __name__ == "__main__":
    main()

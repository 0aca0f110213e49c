"""Dispatch overhead of ``ToolManager.run_tool``, against the peers, and ``get_openai_tools()``.

Run: ``.venv/bin/python bench/bench_tool_dispatch.py [--rounds N] [--peers-only] [--json]``;
``--breakdown`` times each piece of ``run_tool``'s path alone instead.

1. **Peers**: the same trivial async tool (``add(a: int, b: int = 1) -> int``) through
   ``ToolManager.run_tool`` here and, in a child process of ``bench/.venv-peers`` (made by
   ``bench/setup-peers.sh``), through pydantic-ai's ``FunctionToolset`` (arguments validated
   by its pydantic-core validator, then ``call_tool``) and openai-agents' ``FunctionTool``
   (``on_invoke_tool`` with the JSON arguments). Rounds alternate between sagents and the peers;
   the figure per side is the median over rounds of the mean CPU time of one call, and the
   ratio is sagents / peer (1.0 = as fast; the goal is ≤ 2 against pydantic-ai). Without the
   peers' venv, this part says so and is skipped.
2. **Paths**: per-call CPU time of direct calls, JSON arguments with coercion, ``ToolProxy``, a
   listened-to call (a progress consumer registered: the coalescing binding), a sync tool.
3. **Export**: registering 2000 MCP-like tools and ``get_openai_tools()`` against a
   ``json.dumps`` + ``loads`` of their schemas.

Figures are CPU time of this process (``time.process_time``), which a shared, loaded machine
disturbs far less than wall time; ratios matter, not absolute values. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.progress import ProgressHub
from sagents.progress._binding import LazyToolCall
from sagents.tool import SessionContext, ToolCall, ToolManager, ToolProxy, build_local_tool
from sagents.tool._arguments import ArgumentValidator, ScalarParameters, parse_arguments
from sagents.tool._deadline import await_within
from sagents.tool._result_conversion import to_tool_result

CALLS = 2000
WARMUP = 200
REPEATS = 5
TOOLS = 2000
PEERS_PYTHON = Path(__file__).resolve().parent / ".venv-peers" / "bin" / "python"
PEERS_SCRIPT = Path(__file__).resolve().parent / "peers" / "tool_dispatch_peers.py"


async def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


def add_sync(a: int, b: int = 1) -> int:
    """Add two numbers (in a worker thread)."""
    return a + b


async def _mean_us(call: Callable[[], Awaitable[Any]], calls: int = CALLS) -> float:
    """Mean CPU time of one call in microseconds, after a warm-up."""
    for _ in range(WARMUP):
        await call()
    start = time.process_time()
    for _ in range(calls):
        await call()
    return (time.process_time() - start) / calls * 1e6


async def _per_call_us(call: Callable[[], Awaitable[Any]]) -> float:
    """Median over REPEATS of :func:`_mean_us`."""
    return statistics.median([await _mean_us(call) for _ in range(REPEATS)])


def _peer_round() -> dict[str, float] | None:
    if not PEERS_PYTHON.exists():
        return None
    completed = subprocess.run(
        [str(PEERS_PYTHON), str(PEERS_SCRIPT), str(CALLS)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    figures = json.loads(completed.stdout.strip().splitlines()[-1])
    return {str(k): float(v) for k, v in figures.items()}


async def peers(rounds: int) -> dict[str, Any]:
    """sagents' ``run_tool`` against the peers, rounds alternating; medians and ratios."""
    tm = ToolManager()
    tm.register_tool(add)

    async def call() -> None:
        result = await tm.run_tool("add", {"a": 1, "b": 2})
        assert result.structured == {"result": 3}, result

    ours: list[float] = []
    theirs: dict[str, list[float]] = {}
    for _ in range(rounds):
        ours.append(await _mean_us(call))
        figures = await anyio.to_thread.run_sync(_peer_round)
        if figures is None:
            break
        for name, value in figures.items():
            theirs.setdefault(name, []).append(value)
    report: dict[str, Any] = {"sagents run_tool": statistics.median(ours), "peers": {}}
    for name, values in theirs.items():
        median = statistics.median(values)
        report["peers"][name] = {"us": median, "ratio": report["sagents run_tool"] / median}
    return report


async def paths() -> dict[str, float]:
    """Per-call CPU time of the call paths, and of the direct call (the baseline)."""
    tm = ToolManager()
    tm.register_tool(add)
    tm.register_tool(add_sync)
    proxy = ToolProxy([tm], available_tools=["add"])
    hub = ProgressHub()
    listened = ToolManager(progress_hub=hub)
    listened.register_tool(add)
    session = SessionContext(session_id="listened")
    figures = {"direct call of the async function": await _per_call_us(lambda: add(a=1, b=2))}
    figures["run_tool, dict arguments"] = await _per_call_us(
        lambda: tm.run_tool("add", {"a": 1, "b": 2})
    )
    figures["run_tool, JSON text + coercion"] = await _per_call_us(
        lambda: tm.run_tool("add", '{"a": "1", "b": 2}')
    )
    figures["ToolProxy.run_tool"] = await _per_call_us(
        lambda: proxy.run_tool("add", {"a": 1, "b": 2})
    )
    async with hub.subscribe("listened") as events, anyio.create_task_group() as tg:

        async def drain() -> None:  # a consumer that keeps up (its `closed` events)
            async for _ in events:
                pass

        tg.start_soon(drain)
        figures["run_tool, listened to (+ a checkpoint per call)"] = await _per_call_us(
            lambda: _yielding(listened.run_tool("add", {"a": 1, "b": 2}, session))
        )
        tg.cancel_scope.cancel()
    figures["run_tool, sync tool (worker thread)"] = await _per_call_us(
        lambda: tm.run_tool("add_sync", {"a": 1, "b": 2})
    )
    return figures


async def _yielding(call: Awaitable[Any]) -> Any:
    """Await ``call``, then let the loop run once (so that a consumer task keeps up)."""
    result = await call
    await anyio.lowlevel.checkpoint()
    return result


async def breakdown(rounds: int) -> dict[str, float]:
    """Each piece of ``run_tool``'s path on the trivial tool, timed alone (min over rounds)."""
    tm = ToolManager()
    tm.register_tool(add)
    local = build_local_tool(add)
    validator = ArgumentValidator(local.spec.input_schema, check=False)
    context = SessionContext()
    arguments = {"a": 1, "b": 2}
    hub = ProgressHub()

    async def whole() -> None:
        await tm.run_tool("add", arguments, context)

    async def whole_anonymous() -> None:
        await tm.run_tool("add", arguments)

    async def timeout_scope() -> None:
        with anyio.move_on_after(300):  # noqa: ASYNC100 - the scope's own cost is measured
            pass

    async def lazy_binding() -> None:
        pending = LazyToolCall(hub, "s", None)
        pending.unbind(pending.bind())

    scalars = ScalarParameters(local.scalar_kinds or {}, validator)

    async def scalar_check() -> None:
        scalars.accepts(arguments)

    async def parse_and_check() -> None:
        validator.validate("add", parse_arguments("add", arguments), owned=True)

    async def binding_as_is() -> None:
        local.bind_valid(dict(arguments), None)

    async def pydantic_binding() -> None:
        local.bind(arguments, context)

    async def function() -> None:
        await await_within(add(a=1, b=2), 300.0)

    async def result() -> None:
        to_tool_result(3, tool_name="add", wrap_result=True)

    async def call_value() -> None:
        ToolCall(tool_name="add", session_context=context, tool_call_id="c", timeout=300.0)

    async def default_context() -> None:
        SessionContext()

    pieces: dict[str, Callable[[], Awaitable[None]]] = {
        "run_tool, whole (no session: a default context)": whole_anonymous,
        "run_tool, whole (a session nobody listens to)": whole,
        "one-pass scalar check + compiled schema check": scalar_check,
        "await_within (the function returns: no timer)": function,
        "to_tool_result (ToolResult and its text block)": result,
        "the lazy progress binding": lazy_binding,
        "bind_valid (scalars: as they are)": binding_as_is,
        "the ToolCall value": call_value,
        "a default SessionContext (a call of no session)": default_context,
        "not on the path of scalar tools: parse + schema check": parse_and_check,
        "not on the path: pydantic binding (LocalTool.bind)": pydantic_binding,
        "not on the path: a timer (anyio.move_on_after)": timeout_scope,
    }
    runs: dict[str, list[float]] = {label: [] for label in pieces}
    for _ in range(rounds):
        for label, piece in pieces.items():
            runs[label].append(await _mean_us(piece))
    return {label: min(values) for label, values in runs.items()}


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


def export() -> dict[str, float]:
    """Milliseconds to register 2000 tools and export them, and the JSON baseline."""
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
    assert len(tools) == TOOLS
    return {
        "register_ms": register_s * 1e3,
        "baseline_ms": baseline_s * 1e3,
        "first_ms": first_s * 1e3,
        "cached_ms": statistics.median(cached) * 1e3,
    }


def _print(report: dict[str, Any]) -> None:
    comparison = report["peers"]
    ours = comparison["sagents run_tool"]
    print(f"run_tool on a trivial local tool: {ours:8.2f} us/call CPU (median of rounds)")
    if not comparison["peers"]:
        print("  peers: not measured (run bench/setup-peers.sh to create bench/.venv-peers)")
    for name, figures in comparison["peers"].items():
        print(
            f"  {name + ':':30} {figures['us']:8.2f} us/call   sagents/peer {figures['ratio']:6.2f}"
        )
    if "paths" not in report:
        return
    direct = report["paths"]["direct call of the async function"]
    print(f"direct call of the async function:        {direct:9.2f} us/call CPU (baseline)")
    for label, value in report["paths"].items():
        if label.startswith("direct"):
            continue
        print(f"{label + ':':42} {value:9.2f} us/call CPU  ratio {value / direct:8.1f}x")
    e = report["export"]
    print(f"register {TOOLS} (spec, handler) tools:  {e['register_ms']:9.1f} ms")
    print(f"baseline: json.dumps + loads of the {TOOLS} schemas: {e['baseline_ms']:9.1f} ms")
    first, cached, base = e["first_ms"], e["cached_ms"], e["baseline_ms"]
    print(f"get_openai_tools(), first call:  {first:9.1f} ms  ratio {first / base:6.1f}x")
    print(f"get_openai_tools(), cached:      {cached:9.1f} ms  ratio {cached / base:6.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="sagents/peer rounds (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--peers-only", action="store_true", help="only the peer comparison")
    parser.add_argument(
        "--breakdown", action="store_true", help="only the pieces of run_tool, each timed alone"
    )
    options = parser.parse_args()
    if options.breakdown:
        pieces = anyio.run(breakdown, 6)
        if options.json:
            print(json.dumps(pieces))
        for label, value in pieces.items():
            print(f"{label + ':':50} {value:7.2f} us/call CPU (min of 6 rounds)")
        return
    report: dict[str, Any] = {"peers": anyio.run(peers, options.rounds)}
    if not options.peers_only:
        report["paths"] = anyio.run(paths)
        report["export"] = export()
    if options.json:
        print(json.dumps(report))
    else:
        _print(report)


if __name__ == "__main__":
    sys.exit(main())

"""Tool suggestion in the agent loop: tool-definition tokens the model receives, and the loop's
cost, with ``max_tools_per_turn`` against without, in the same run.

Run: ``.venv/bin/python bench/bench_tool_suggestion_loop.py [--tools 1000] [--json]``.

One task on a synthetic registry (``bench_suggest.synthetic_registry``: ``<service>__<action>``
tools with 2-4 parameters each), against the scripted model (``sagents.testing``) on
127.0.0.1, through the real ``openai`` client:

- off (the baseline, ``max_tools_per_turn=None``): the model calls a tool, then another one,
  then answers: three requests, each carrying every schema;
- on (``max_tools_per_turn=10``, the offline ranking): the model calls a suggested tool, then
  ``tool_expand_tools`` for one it was not offered, then that tool, then answers: four
  requests (one more turn: the price of expansion), each carrying the suggested tools, the
  expanded one and ``tool_expand_tools``.

Prints the tool-definition tokens of each request (the project's offline counter over
``json.dumps`` of the request's ``tools``, as bench_suggest counts them), their sum per task,
and the median CPU milliseconds per task (client, loop, ranking and the in-process server
together) with the ratio on/off. The first ranking of a tool set builds its index; it is
measured apart, then every task reuses it. Not a test; figures vary with load.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_suggest import synthetic_registry  # the registry bench_suggest ranks

from sagents.agent import SAgent, suggest_tools
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.core._tokens import default_token_counter
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import ToolManager
from sagents.tool._handler import ToolCall

K = 10
REPEATS = 5
QUERY = "please update the billing entries for last week"
OWN = {"tool_expand_tools", "load_skill", "read_skill_file", "run_script"}


def registry(size: int) -> tuple[ToolManager, list[ToolSpec]]:
    specs = [
        ToolSpec(
            name=s.name,
            description=s.description,
            input_schema=s.input_schema,
            permission="read_only",
        )
        for s in synthetic_registry(size)
    ]

    async def handle(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_text("ok")

    manager = ToolManager()
    for spec in specs:
        manager.register_tool((spec, handle))
    return manager, specs


def offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def arguments(body: dict[str, Any], name: str) -> dict[str, Any]:
    """Valid arguments of ``name`` as the request describes it (its required parameters)."""
    schema = next(
        t["function"]["parameters"] for t in body["tools"] if t["function"]["name"] == name
    )
    samples = {"string": "x", "integer": 1, "array": ["x"]}
    return {
        key: samples.get(schema["properties"][key].get("type"), "x")
        for key in schema.get("required", [])
    }


def script(suggestion: bool, unseen: str) -> Any:
    """The model of the task: a function of each request (so the same script fits both)."""

    def answer(body: dict[str, Any]) -> ScriptedReply:
        calls = [m for m in body["messages"] if m.get("role") == "assistant"]
        names = [n for n in offered(body) if n not in OWN]
        if not calls:
            return tool_call(names[0], arguments(body, names[0]))
        if suggestion and len(calls) == 1:
            return tool_call("tool_expand_tools", {"tool_names": [unseen]})
        if len(calls) == (2 if suggestion else 1):
            return tool_call(unseen, arguments(body, unseen))
        return reply("Done.")

    return answer


async def task(
    model: ScriptedModel, manager: ToolManager, suggestion: bool
) -> list[dict[str, Any]]:
    agent = SAgent(
        model=model.chat_model(),
        run_script=False,
        max_tools_per_turn=K if suggestion else None,
    )
    before = len(model.requests)
    async with aclosing(
        agent.run_stream([{"role": "user", "content": QUERY}], tool_manager=manager)
    ) as events:
        async for _ in events:
            pass
    return model.requests[before:]


def tokens(requests: list[dict[str, Any]]) -> list[int]:
    counter = default_token_counter()
    return [counter.count(json.dumps(r.get("tools") or [])) for r in requests]


async def measure(size: int) -> dict[str, Any]:
    manager, specs = registry(size)
    first = time.process_time()
    ranked = suggest_tools(QUERY, specs, K)  # builds the index of this tool set
    index_ms = (time.process_time() - first) * 1000
    unseen = next(s.name for s in reversed(specs) if s.name not in ranked)
    result: dict[str, Any] = {"tools": size, "k": K, "index_build_cpu_ms": round(index_ms, 1)}
    for suggestion in (False, True):
        side = "on" if suggestion else "off"
        async with ScriptedModel(script(suggestion, unseen)) as model:
            requests = await task(model, manager, suggestion)
            per_request = tokens(requests)
            runs = []
            for _ in range(REPEATS):
                start = time.process_time()
                await task(model, manager, suggestion)
                runs.append((time.process_time() - start) * 1000)
        result[side] = {
            "requests": len(requests),
            "tool_tokens_per_request": per_request,
            "tool_tokens_per_task": sum(per_request),
            "cpu_ms_per_task": round(statistics.median(runs), 1),
        }
    off, on = result["off"], result["on"]
    result["tokens_on_over_off"] = round(
        on["tool_tokens_per_task"] / off["tool_tokens_per_task"], 4
    )
    result["cpu_on_over_off"] = round(on["cpu_ms_per_task"] / off["cpu_ms_per_task"], 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000, help="registry size")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # one line per request otherwise
    result = anyio.run(measure, args.tools)
    if args.json:
        print(json.dumps(result))
        return
    print(f"registry: {result['tools']} tools, k = {result['k']}")
    print(f"index build (first ranking of this tool set): {result['index_build_cpu_ms']} ms CPU")
    for side in ("off", "on"):
        row = result[side]
        print(
            f"suggestion {side:3}: {row['requests']} requests, tool tokens per request "
            f"{row['tool_tokens_per_request']}, per task {row['tool_tokens_per_task']:,}, "
            f"{row['cpu_ms_per_task']} ms CPU per task"
        )
    print(f"on/off: tool tokens x{result['tokens_on_over_off']}, CPU x{result['cpu_on_over_off']}")


if __name__ == "__main__":
    main()

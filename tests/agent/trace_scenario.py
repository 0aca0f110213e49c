"""An agent turn that calls run_script, whose script calls a real stdio MCP server, with the
OpenTelemetry SDK's in-memory exporter as the process's tracer provider.

Run as ``python -m tests.agent.trace_scenario WORKSPACE`` (a process of its own: a tracer
provider is set once per process, and the test process keeps none,
``tests/gateway/test_tracing.py``). Prints one JSON object: ``spans`` (each finished span's
name, kind, ids, parent id, attributes and status) and ``result`` (the run_script call's tool
message); ``capped_spans`` and ``capped_result`` of a second turn whose script makes more calls
than a run traces; then ``gateway_spans`` and ``gateway_result`` of a ``tools/call`` an MCP
client sends a gateway on the same tools (its ``traceparent`` in ``_meta``, written by the SDK's
client), and of one it sends for a tool the gateway does not offer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sagents.agent import SAgent
from sagents.gateway import Gateway
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext, ToolManager
from tests.agent.helpers import collect, done_of, tool_messages

ECHO = Path(__file__).resolve().parents[1] / "gateway" / "fixtures" / "stdio_echo.py"
CODE = (
    "from agent_tools import call\n"
    "seen = call('echo__meta', {})\n"
    "print('trace', seen['trace']['traceparent'])\n"
    "print(call('echo__echo', {'text': 'hi'}))\n"
)
MANY = 102
"""Calls of the second script: two past the cap of calls a run traces (``MAX_TRACED_CALLS``)."""
CODE_MANY = (
    "from agent_tools import call_many\n"
    f"rows = call_many('echo__meta', [{{}}] * {MANY})\n"
    "print('seen', ' '.join(row['trace']['traceparent'] for row in rows))\n"
)


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
    }


async def main(workspace: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    arguments = {"code": CODE, "tools": [], "description": "trace it"}
    script = [tool_call("run_script", arguments, id="call_script"), reply("done")]
    async with ToolManager() as manager:
        params = StdioServerParameters(command=sys.executable, args=[str(ECHO), "sdk"])
        await manager.register_mcp_server(name="echo", params=params)
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model())
            context = SessionContext(session_id="traced", workspace=str(workspace))
            done = done_of(
                await collect(
                    agent,
                    [{"role": "user", "content": "go"}],
                    tool_manager=manager,
                    session_context=context,
                )
            )
        (result,) = tool_messages(done.messages)
        agent_spans = [_span(span) for span in exporter.get_finished_spans()]
        exporter.clear()
        # a script of more calls than a run traces: the later ones' spans are left out
        many = {"code": CODE_MANY, "tools": [], "description": "many calls"}
        script = [tool_call("run_script", many, id="call_many"), reply("done")]
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model())
            context = SessionContext(session_id="capped", workspace=str(workspace))
            capped = done_of(
                await collect(
                    agent,
                    [{"role": "user", "content": "go"}],
                    tool_manager=manager,
                    session_context=context,
                )
            )
        (capped_result,) = tool_messages(capped.messages)
        capped_spans = [_span(span) for span in exporter.get_finished_spans()]
        exporter.clear()
        # the gateway's tools/call, from a client that sends its trace context (the SDK's
        # client writes its span's traceparent into the request's _meta)
        async with (
            Gateway(manager, mode="auto") as gateway,
            Client(gateway.server, mode="legacy") as client,
        ):
            called = await client.call_tool("echo__meta", {})
            refused = await client.call_tool("echo__missing", {"text": "x"})
            assert refused.is_error, refused
        gateway_spans = [_span(span) for span in exporter.get_finished_spans()]
    print(
        json.dumps(
            {
                "spans": agent_spans,
                "result": result["content"],
                "reason": done.reason,
                "gateway_spans": gateway_spans,
                "gateway_result": called.structured_content,
                "capped_spans": capped_spans,
                "capped_result": capped_result["content"],
            }
        )
    )


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))

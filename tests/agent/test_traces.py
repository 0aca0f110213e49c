"""The span tree of an agent turn that calls run_script, whose script calls a real stdio MCP
server, as the OpenTelemetry SDK's in-memory exporter receives it (docs/observability.md,
"Traces"); the scenario runs in a process of its own (tests/agent/trace_scenario.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from sagents.core._tracing import CAPTURE_CONTENT_ENV, capture_content, tracing, unsampled
from sagents.script._dispatcher import MAX_TRACED_CALLS
from tests.agent.trace_scenario import MANY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workspace = tmp_path_factory.mktemp("traced") / "ws"
    env = {**os.environ, CAPTURE_CONTENT_ENV: "true"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.agent.trace_scenario", str(workspace)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [span for span in spans if span["name"] == name]
    return found


def test_the_turn_is_one_trace_agent_model_tool_script_call_upstream(
    traced: dict[str, Any],
) -> None:
    assert traced["reason"] == "stop"
    run = one(traced["spans"], "invoke_agent")
    assert run["parent_id"] is None
    # one trace for the turn (the server's start, before the run, is a trace of its own)
    spans = [span for span in traced["spans"] if span["trace_id"] == run["trace_id"]]
    assert {span["name"] for span in traced["spans"] if span not in spans} <= {
        "MCP send server/discover",
        "MCP send initialize",
        "MCP send tools/list",
    }
    assert run["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert run["attributes"]["gen_ai.conversation.id"] == "traced"
    chats = [span for span in spans if span["name"].startswith("chat ")]
    assert len(chats) == 2  # the tool turn and the answer
    for chat in chats:
        assert chat["parent_id"] == run["span_id"]
        assert chat["kind"] == "CLIENT"
        assert chat["attributes"]["gen_ai.operation.name"] == "chat"
        assert chat["attributes"]["gen_ai.provider.name"] == "openai"
        assert chat["name"] == f"chat {chat['attributes']['gen_ai.request.model']}"
        assert chat["attributes"]["gen_ai.usage.input_tokens"] >= 0
    assert [chat["attributes"]["gen_ai.response.finish_reasons"] for chat in chats] == [
        ["tool_calls"],
        ["stop"],
    ]
    tool = one(spans, "execute_tool run_script")
    assert tool["parent_id"] == run["span_id"]
    assert tool["attributes"]["gen_ai.tool.call.id"] == "call_script"
    assert tool["attributes"]["sagents.outcome"] == "ok"
    assert "agent_tools" in tool["attributes"]["gen_ai.tool.call.arguments"]  # captured
    script = one(spans, "sagents.run_script")
    assert script["parent_id"] == tool["span_id"]
    assert script["attributes"]["sagents.script.status"] == "ok"
    assert script["attributes"]["sagents.script.calls"] == 2
    assert script["attributes"]["sagents.script.traced_calls"] == 2
    for name in ("meta", "echo"):
        call = one(spans, f"execute_tool echo__{name}")
        assert call["parent_id"] == script["span_id"]
        assert call["attributes"]["gen_ai.operation.name"] == "execute_tool"
        assert call["attributes"]["sagents.outcome"] == "ok"
        upstream = one(spans, f"MCP send tools/call {name}")  # the MCP SDK's client span
        assert upstream["parent_id"] == call["span_id"]
        assert upstream["kind"] == "CLIENT"
        assert upstream["attributes"]["mcp.method.name"] == "tools/call"


def test_the_upstream_server_received_the_trace_context_of_its_call(
    traced: dict[str, Any],
) -> None:
    upstream = one(traced["spans"], "MCP send tools/call meta")
    line = next(line for line in traced["result"].splitlines() if line.startswith("trace "))
    _version, trace_id, parent_id, _flags = line.removeprefix("trace ").split("-")
    assert (trace_id, parent_id) == (upstream["trace_id"], upstream["span_id"])


def test_calls_past_the_cap_of_a_run_record_no_span_and_go_on_in_the_trace_unsampled(
    traced: dict[str, Any],
) -> None:
    spans = traced["capped_spans"]
    script = one(spans, "sagents.run_script")
    assert script["attributes"]["sagents.script.calls"] == MANY
    assert script["attributes"]["sagents.script.traced_calls"] == MAX_TRACED_CALLS
    calls = [span for span in spans if span["name"] == "execute_tool echo__meta"]
    assert len(calls) == MAX_TRACED_CALLS
    assert {call["parent_id"] for call in calls} == {script["span_id"]}
    # the MCP SDK's client span of each upstream request: only under the traced calls
    upstream = [span for span in spans if span["name"] == "MCP send tools/call meta"]
    assert sorted(span["parent_id"] for span in upstream) == sorted(
        call["span_id"] for call in calls
    )
    line = next(line for line in traced["capped_result"].splitlines() if line.startswith("seen "))
    seen = [value.split("-") for value in line.removeprefix("seen ").split()]
    assert len(seen) == MANY
    # every request carried the run's trace; those past the cap with the sampled flag cleared
    assert {trace_id for _version, trace_id, _parent, _flags in seen} == {script["trace_id"]}
    sampled = [parent for _version, _trace, parent, flags in seen if int(flags, 16) & 0x01]
    assert sorted(sampled) == sorted(span["span_id"] for span in upstream)
    assert len(sampled) == MAX_TRACED_CALLS


def test_unsampled_clears_only_the_sampled_flag_of_the_current_trace_and_needs_one() -> None:
    with unsampled():  # no current trace: nothing to mark
        assert not trace.get_current_span().get_span_context().is_valid
    parent = SpanContext(0xAB, 0xCD, is_remote=True, trace_flags=TraceFlags(0x03))
    with trace.use_span(NonRecordingSpan(parent)), unsampled():
        inner = trace.get_current_span().get_span_context()
        assert (inner.trace_id, inner.span_id, inner.is_remote) == (0xAB, 0xCD, False)
        assert inner.trace_flags == 0x02  # the random flag kept
        with unsampled():  # already not sampled: stays as it is
            assert trace.get_current_span().get_span_context() == inner
    assert trace.get_current_span().get_span_context() == SpanContext(0, 0, is_remote=False)


def test_without_a_tracer_provider_nothing_is_traced_and_content_is_captured_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert tracing() is False  # the test process configures none
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    assert capture_content() is False
    for value, expected in (("true", True), ("TRUE", True), ("1", True), ("false", False)):
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
        assert capture_content() is expected


def test_a_gateway_call_continues_the_clients_trace_down_to_the_upstream(
    traced: dict[str, Any],
) -> None:
    spans = traced["gateway_spans"]
    # the client is the MCP SDK's, in the same traced process: its own span sends its context
    client = one(spans, "MCP send tools/call echo__meta")
    trace_id = client["trace_id"]
    server = one(spans, "tools/call echo__meta")  # the MCP SDK's server span
    assert server["kind"] == "SERVER"
    assert (server["trace_id"], server["parent_id"]) == (trace_id, client["span_id"])
    # the gateway's attributes are on the SDK's span: no second span per call
    assert [span["name"] for span in spans if span["name"].startswith("execute_tool")] == []
    attributes = server["attributes"]
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "echo__meta"
    assert attributes["sagents.server"] == "echo"
    assert attributes["sagents.outcome"] == "ok"
    assert attributes["gen_ai.tool.call.arguments"] == "{}"  # captured
    assert '"trace"' in attributes["gen_ai.tool.call.result"]  # captured
    assert server["status"] == "UNSET"
    upstream = one(spans, "MCP send tools/call meta")
    assert upstream["parent_id"] == server["span_id"]
    seen = traced["gateway_result"]["trace"]["traceparent"]
    assert seen.split("-")[1:3] == [trace_id, upstream["span_id"]]


def test_a_gateway_call_that_fails_carries_its_error_code_on_the_sdks_span(
    traced: dict[str, Any],
) -> None:
    refused = one(traced["gateway_spans"], "tools/call echo__missing")
    attributes = refused["attributes"]
    assert attributes["sagents.outcome"] == "unknown_tool"
    assert attributes["sagents.server"] == ""  # no upstream offers it
    assert attributes["error.type"] == "tool_error"  # the SDK's, for an isError result
    assert refused["status"] == "ERROR"
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"text": "x"}

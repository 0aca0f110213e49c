"""``AnthropicModel`` through the real ``anthropic`` SDK client against recorded Messages API
streams.

Each fixture ``tests/agent/wire/anthropic_*.json`` is written from Anthropic's documented stream
and error formats (the file names its sources) and played back by ``ScriptedModel`` on
127.0.0.1 as named SSE events; the adapter and the agent loop run against it as against the
API. docs/agent.md, "AnthropicModel", lists what the adapter handles.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sagents.agent import (
    AnthropicModel,
    Message,
    ModelRequest,
    ModelSettings,
    ReasoningDeltaEvent,
    ReasoningPart,
    SAgent,
    TextPart,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultPart,
    UsageEvent,
    model_from_string,
)
from sagents.agent._events import AgentEvent, DoneEvent
from sagents.core._spec import ToolSpec
from sagents.errors import ModelConfigError
from sagents.testing import ScriptedModel, WireReply, load_wire
from sagents.tool import SessionContext
from sagents.tool._examples import EXAMPLES_META_KEY
from tests.agent.helpers import (
    assert_settled_once,
    collect,
    done_of,
    finish_of,
    tool_messages,
)
from tests.agent.helpers import model_events as call
from tests.agent.test_servers import Tools

pytestmark = pytest.mark.anyio

WIRE = Path(__file__).parent / "wire"
USER = [{"role": "user", "content": "go"}]
AUTO = SessionContext(permission_mode="auto")
WEATHER = ToolSpec(
    name="get_weather",
    description="The weather of a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def wire(name: str) -> list[WireReply]:
    return load_wire(WIRE / f"anthropic_{name}.json")


def anthropic_model(server: ScriptedModel, **options: Any) -> AnthropicModel:
    return AnthropicModel(
        "anthropic:claude-sonnet-4-5",
        base_url=server.base_url.removesuffix("/v1"),
        api_key="scripted-key",
        **options,
    )


async def run(
    script: Sequence[WireReply], **model_options: Any
) -> tuple[list[AgentEvent], DoneEvent, ScriptedModel, Tools]:
    tools = Tools()
    async with ScriptedModel(script) as server:
        model = anthropic_model(server, **model_options)
        try:
            agent = SAgent(model=model, run_script=False)
            events = await collect(agent, USER, tool_manager=tools.manager(), session_context=AUTO)
        finally:
            await model.aclose()
    done = done_of(events)
    assert_settled_once(done.messages)
    return events, done, server, tools


# -- a text turn --------------------------------------------------------------------------------


async def test_a_text_turn_streams_its_text_and_reports_usage_with_cached_tokens() -> None:
    events, done, server, _tools = await run(wire("text"))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Hello! How can I help?"
    usage = [e for e in events if isinstance(e, UsageEvent)]
    # input_tokens (25) plus cache_read_input_tokens (100): every prompt token
    assert [(u.prompt_tokens, u.completion_tokens, u.cached_tokens) for u in usage] == [
        (125, 12, 100)
    ]
    (body,) = server.requests
    assert body["model"] == "claude-sonnet-4-5"
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    assert body["max_tokens"] > 0


async def test_the_system_prompt_is_the_top_level_system_and_settings_map() -> None:
    async with ScriptedModel(wire("text")) as server:
        model = anthropic_model(server)
        try:
            request = ModelRequest(
                system_prompt="Be brief.",
                messages=(Message(role="user", parts=(TextPart(text="hi"),)),),
                tools=(WEATHER,),
                settings=ModelSettings(
                    temperature=0.2,
                    max_tokens=99,
                    tool_choice="required",
                    parallel_tool_calls=False,
                ),
            )
            events = await call(model, request)
        finally:
            await model.aclose()
    assert finish_of(events).reason == "stop"
    (body,) = server.requests
    assert body["system"] == "Be brief."
    assert all(m["role"] != "system" for m in body["messages"])
    assert body["max_tokens"] == 99
    assert body["temperature"] == 0.2
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather of a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]


# -- tool use -----------------------------------------------------------------------------------


async def test_parallel_tool_use_runs_each_call_once_and_sends_back_one_user_message() -> None:
    _events, done, server, tools = await run(wire("parallel_tool_use"))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Sunny in Paris and in London."
    assert sorted(tools.calls, key=lambda c: c[1]["city"]) == [
        ("get_weather", {"city": "London"}),
        ("get_weather", {"city": "Paris"}),
    ]
    assert [m["tool_call_id"] for m in tool_messages(done.messages)] == [
        "toolu_01Paris",
        "toolu_02London",
    ]
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == [
        {"type": "text", "text": "Let me check both cities."},
        {
            "type": "tool_use",
            "id": "toolu_01Paris",
            "name": "get_weather",
            "input": {"city": "Paris"},
        },
        {
            "type": "tool_use",
            "id": "toolu_02London",
            "name": "get_weather",
            "input": {"city": "London"},
        },
    ]
    results = second[2]["content"]
    assert [(b["type"], b["tool_use_id"]) for b in results] == [
        ("tool_result", "toolu_01Paris"),
        ("tool_result", "toolu_02London"),
    ]
    assert results[0]["content"] == "sunny in Paris"


async def test_tool_use_streams_input_json_deltas_as_seam_events() -> None:
    async with ScriptedModel(wire("parallel_tool_use")[:1]) as server:
        model = anthropic_model(server)
        try:
            events = await call(model, ModelRequest(messages=(Message(role="user"),)))
        finally:
            await model.aclose()
    starts = [(e.index, e.id, e.name) for e in events if isinstance(e, ToolCallStart)]
    assert starts == [(0, "toolu_01Paris", "get_weather"), (1, "toolu_02London", "get_weather")]
    pieces = [e.arguments for e in events if isinstance(e, ToolCallArgumentsDelta) and e.index == 0]
    assert pieces == ['{"city":', ' "Par', 'is"}']
    ends = [e.call for e in events if isinstance(e, ToolCallEnd)]
    assert [c.arguments for c in ends] == ['{"city": "Paris"}', '{"city": "London"}']
    assert finish_of(events).reason == "tool_calls"


async def test_max_tokens_inside_a_tool_use_runs_nothing_and_says_so() -> None:
    _events, done, server, tools = await run(wire("max_tokens_in_tool_use"))
    assert tools.calls == []
    (result,) = tool_messages(done.messages)
    assert result["tool_call_id"] == "toolu_01Cut"
    assert "length" in result["content"]
    assert done.messages[-1]["content"] == "I ran out of room; nothing was saved."
    # the cut call goes back as a tool_use with an object input, answered by its result
    second = server.requests[1]["messages"]
    assert second[1]["content"] == [
        {"type": "tool_use", "id": "toolu_01Cut", "name": "save", "input": {}}
    ]
    assert second[2]["content"][0]["tool_use_id"] == "toolu_01Cut"


# -- thinking -----------------------------------------------------------------------------------


async def test_thinking_blocks_keep_their_signature_and_go_back_before_the_tool_use() -> None:
    thinking = {"type": "enabled", "budget_tokens": 2048}
    async with ScriptedModel(wire("thinking_tool_use")) as server:
        model = anthropic_model(server, thinking=thinking)
        try:
            user = Message(role="user", parts=(TextPart(text="weather in Paris?"),))
            first = await call(model, ModelRequest(messages=(user,), tools=(WEATHER,)))
            answer = finish_of(first).response.message
            (call_part,) = answer.tool_calls
            result = Message(
                role="tool",
                parts=(ToolResultPart(tool_call_id=call_part.id, content="sunny"),),
            )
            second = await call(
                model, ModelRequest(messages=(user, answer, result), tools=(WEATHER,))
            )
        finally:
            await model.aclose()
    reasoning = [p for p in answer.parts if isinstance(p, ReasoningPart)]
    assert reasoning == [
        ReasoningPart(
            text="The user wants the weather. I will call get_weather.",
            signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
            provider="anthropic",
        )
    ]
    assert finish_of(second).response.message.text == "It is sunny in Paris."
    body = server.requests[1]
    assert body["thinking"] == thinking
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants the weather. I will call get_weather.",
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
            },
            {
                "type": "tool_use",
                "id": "toolu_01Think",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
        ],
    }


async def test_thinking_streams_as_reasoning_events_through_the_loop() -> None:
    events, done, _server, tools = await run(wire("thinking_tool_use"))
    assert done.reason == "stop"
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    reasoning = "".join(e.delta for e in events if isinstance(e, ReasoningDeltaEvent))
    assert reasoning == "The user wants the weather. I will call get_weather."


def _stream(*events: dict[str, Any]) -> WireReply:
    """A streamed answer of these Messages API events, each a named SSE event."""
    return WireReply.from_json({"events": list(events)})


def _text_answer(text: str, *, start: int = 0) -> list[dict[str, Any]]:
    message: dict[str, Any] = {
        "id": "msg_01Hand",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-5",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    return [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": start, "content_block": {"type": "text"}},
        {
            "type": "content_block_delta",
            "index": start,
            "delta": {"type": "text_delta", "text": text},
        },
        {"type": "content_block_stop", "index": start},
    ]


_END: list[dict[str, Any]] = [
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 3},
    },
    {"type": "message_stop"},
]


async def test_a_redacted_thinking_block_goes_back_as_it_came() -> None:
    """A ``redacted_thinking`` block comes whole in its ``content_block_start`` ("Extended
    thinking", "Thinking redaction") and goes back before the text, its data unchanged."""
    start, *text = _text_answer("Done.", start=1)
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}
    answer = _stream(
        start,
        {"type": "content_block_start", "index": 0, "content_block": redacted},
        {"type": "content_block_stop", "index": 0},
        *text,
        *_END,
    )
    async with ScriptedModel([answer, *wire("text")]) as server:
        model = anthropic_model(server)
        try:
            user = Message(role="user", parts=(TextPart(text="go"),))
            first = await call(model, ModelRequest(messages=(user,)))
            message = finish_of(first).response.message
            again = Message(role="user", parts=(TextPart(text="and?"),))
            await call(model, ModelRequest(messages=(user, message, again)))
        finally:
            await model.aclose()
    assert message.parts == (
        ReasoningPart(
            text="", signature=redacted["data"], id="redacted_thinking", provider="anthropic"
        ),
        TextPart(text="Done."),
    )
    assert server.requests[1]["messages"][1] == {
        "role": "assistant",
        "content": [redacted, {"type": "text", "text": "Done."}],
    }


async def test_a_delta_of_a_block_that_never_started_is_no_answer() -> None:
    """Before anything was passed on, such a stream is retried; after, the run ends with a
    broken-stream error, keeping nothing of it."""
    stray = {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "text_delta", "text": "lost"},
    }
    first, *_rest = _text_answer("unused")
    _seen, done, server, _tools = await run([_stream(first, stray, *_END), *wire("text")])
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Hello! How can I help?"
    assert len(server.requests) == 2
    late = _stream(*_text_answer("Hel"), stray, *_END)
    _seen, done, server, _tools = await run([late, *wire("text")])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert "block 3, which never started" in done.error["message"]
    assert [m["role"] for m in done.messages] == ["user"]
    assert len(server.requests) == 1


def test_a_call_whose_arguments_hold_a_raw_newline_goes_back_with_them() -> None:
    # a history from a server whose grammar let a raw newline into a JSON string
    # (llama-cpp-python, docs/agent.md "Quirks handled"): the call ran with those arguments
    model = AnthropicModel("claude-x", api_key="k", base_url="http://127.0.0.1:9")
    answer = Message(
        role="assistant",
        parts=(ToolCall(id="t1", name="note", arguments='{"text": "two\nlines"}'),),
    )
    result = Message(role="tool", parts=(ToolResultPart(tool_call_id="t1", content="ok"),))
    body = model.request_body(ModelRequest(messages=(answer, result)))
    (tool_use,) = body["messages"][0]["content"]
    assert tool_use["input"] == {"text": "two\nlines"}


def test_reasoning_without_an_anthropic_signature_is_not_sent_as_a_thinking_block() -> None:
    model = AnthropicModel("claude-x", api_key="k", base_url="http://127.0.0.1:9")
    answer = Message(
        role="assistant",
        parts=(
            ReasoningPart(text="another provider's reasoning"),
            ToolCall(id="t1", name="get_weather", arguments=""),
        ),
    )
    results = [
        Message(role="tool", parts=(ToolResultPart(tool_call_id="t1", content="a"),)),
        Message(role="user", parts=(TextPart(text="and then?"),)),
    ]
    body = model.request_body(ModelRequest(messages=(answer, *results)))
    assert body["messages"] == [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
                {"type": "text", "text": "and then?"},
            ],
        },
    ]


# -- errors -------------------------------------------------------------------------------------


async def test_a_429_with_retry_after_then_a_529_overloaded_are_retried() -> None:
    _events, done, server, _tools = await run(wire("rate_limited_then_overloaded"))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Back again."
    assert len(server.requests) == 3


async def test_an_invalid_request_error_is_not_retried() -> None:
    _events, done, server, _tools = await run(wire("invalid_request"))
    assert done.reason == "error"
    assert len(server.requests) == 1
    assert done.error is not None
    assert "invalid_request_error" in done.error["message"]
    assert "try again later" not in json.dumps(done.error)


async def test_an_overloaded_error_event_in_the_stream_is_retried() -> None:
    overloaded = WireReply(
        body=(
            'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
            '"message": "Overloaded"}}\n\n',
        )
    )
    _events, done, server, _tools = await run([overloaded, *wire("text")])
    assert done.reason == "stop"
    assert len(server.requests) == 2


async def test_an_overloaded_error_event_after_text_says_how_many_retries_were_made() -> None:
    # nothing is retried once text was passed on: the error said "after 4 retries"
    # (max_retries), as if the endpoint had failed five times
    (whole,) = wire("text")
    overloaded = (
        'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        '"message": "Overloaded"}}\n\n'
    )
    late = WireReply(body=(*whole.body[:-2], overloaded))
    _events, done, server, _tools = await run([late, *wire("text")])
    assert done.reason == "error"
    assert done.error is not None
    assert len(server.requests) == 1
    assert "after 0 retries" in done.error["message"]


async def test_a_stream_cut_after_text_is_an_error_not_an_answer() -> None:
    (whole,) = wire("text")
    cut = WireReply(body=whole.body[:-2])  # no message_delta, no message_stop
    _events, done, server, _tools = await run([cut, *wire("text")])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert len(server.requests) == 1  # part of it was passed on: not sent again


async def test_a_stream_cut_before_any_content_is_retried() -> None:
    (whole,) = wire("text")
    cut = WireReply(body=whole.body[:2])  # message_start and a ping, then the end
    _events, done, server, _tools = await run([cut, *wire("text")])
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Hello! How can I help?"
    assert len(server.requests) == 2


# -- choosing the model -------------------------------------------------------------------------


def test_the_model_string_names_the_anthropic_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    model = model_from_string("anthropic:claude-sonnet-4-5")
    assert isinstance(model, AnthropicModel)
    assert model.model == "claude-sonnet-4-5"
    assert model.base_url.startswith("http://127.0.0.1:9")
    agent = SAgent(model="anthropic:claude-haiku-4-5")
    assert isinstance(agent.model, AnthropicModel)


def test_no_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        model_from_string("anthropic:claude-sonnet-4-5")


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "anthropic", None)  # `import anthropic` raises ImportError
    with pytest.raises(ModelConfigError) as raised:
        AnthropicModel("claude-sonnet-4-5", api_key="k")
    assert "sagents[anthropic]" in str(raised.value.hint)


async def test_the_loop_sends_a_thinking_block_back_with_its_signature_in_the_next_turn() -> None:
    """The loop keeps its history as neutral messages: the signature of the first answer's
    thinking block reaches the second request (Anthropic refuses the request without it)."""
    _events, done, server, _tools = await run(wire("thinking_tool_use"))
    assert done.reason == "stop"
    sent = server.requests[1]["messages"][1]["content"][0]
    assert sent == {
        "type": "thinking",
        "thinking": "The user wants the weather. I will call get_weather.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
    }
    reasoning = [p for m in done.history for p in m.parts if isinstance(p, ReasoningPart)]
    assert [p.signature for p in reasoning] == [sent["signature"]]


def test_a_tool_with_examples_is_exported_with_them() -> None:
    model = AnthropicModel("claude-x", api_key="k", base_url="http://127.0.0.1:9")
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    examples = {EXAMPLES_META_KEY: [{"key": "a"}]}
    with_meta = ToolSpec(name="lookup", input_schema=schema, meta=examples)
    sent = model.request_body(ModelRequest(tools=(with_meta,)))["tools"]
    assert sent[0]["input_examples"] == [{"key": "a"}]


async def test_a_tool_use_whose_input_comes_whole_in_its_block_start_keeps_it() -> None:
    """https://github.com/Yeachan-Heo/gajae-code/pull/1895: Anthropic-compatible streams that
    give a call's whole input in ``content_block_start`` and send no ``input_json_delta``; the
    call ran with ``{}``. The deltas, when they come (Anthropic's own ``input: {}`` start), are
    the arguments."""
    _events, done, server, tools = await run(wire("compatible_input_in_block_start"))
    assert done.reason == "stop"
    assert sorted(tools.calls, key=lambda c: c[1]["city"]) == [
        ("get_weather", {"city": "London"}),
        ("get_weather", {"city": "Paris"}),
    ]
    sent = server.requests[1]["messages"][1]["content"]
    assert [b["input"] for b in sent] == [{"city": "Paris"}, {"city": "London"}]


async def test_a_message_stop_without_a_stop_reason_is_no_answer() -> None:
    """https://github.com/katanemo/plano/pull/898: a gateway sent a bare ``message_stop`` for
    an upstream stream that errored, and https://github.com/anthropics/anthropic-sdk-typescript/pull/920:
    a stop_reason still null at the end means the stream was interrupted. Without
    ``message_delta``'s stop_reason the answer is not complete: asked again when nothing was
    passed on (the run ended ``stop`` with an empty answer), else ``model_stream_broken`` (the
    cut text was the answer)."""
    bare, cut, answer = wire("message_stop_without_stop_reason")
    _events, done, server, _tools = await run([bare, answer])
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "All done."
    assert len(server.requests) == 2
    _events, done, server, _tools = await run([cut, answer])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert list(done.messages) == USER
    assert len(server.requests) == 1

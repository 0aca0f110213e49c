"""``GeminiModel`` through the real ``google-genai`` client against recorded Gemini API streams.

Each fixture ``tests/agent/wire/gemini_*.json`` is written from the API's documented stream
(``streamGenerateContent?alt=sse``) and the bug reports it names, played back by
``ScriptedModel`` on 127.0.0.1. docs/agent.md, "GeminiModel", lists what the adapter handles.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.agent import (
    GeminiModel,
    Message,
    ModelRequest,
    ModelSettings,
    ReasoningDeltaEvent,
    ReasoningPart,
    SAgent,
    TextPart,
    ToolCall,
    ToolResultPart,
    UsageEvent,
)
from sagents.agent._gemini import _CommentFree
from sagents.core._spec import ToolSpec
from sagents.testing import ScriptedModel, WireReply, load_wire, reply
from tests.agent.helpers import (
    assert_settled_once,
    collect,
    done_of,
    finish_of,
    tool_messages,
)
from tests.agent.helpers import model_events as call
from tests.agent.test_servers import AUTO, NINE_ALNUM, USER, Tools

pytestmark = pytest.mark.anyio

WIRE = Path(__file__).parent / "wire"
SIG = "CiQB0e2Kb3Nc8kqG1Vx+Wq7YkVwS2o0JmCqC1pXr8m/9Vy4tYt0aZ3cEr1pYwQ=="
SIG2 = "CiwBx+9Fr9ZJS8i7RLUnTOLkbZHrpa2LcTamk4Kb6ku9WlktcRZCtyawRAE="
WEATHER = ToolSpec(
    name="get_weather",
    description="The weather of a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def wire(name: str) -> list[WireReply]:
    return load_wire(WIRE / f"gemini_{name}.json")


def same_bytes(sent: str, signature: str) -> bool:
    """Whether two base64 texts (standard or URL-safe) hold the same bytes."""
    return base64.urlsafe_b64decode(sent) == base64.b64decode(signature)


def gemini_model(server: ScriptedModel, **options: Any) -> GeminiModel:
    model = server.chat_model(**options)
    assert isinstance(model, GeminiModel)
    return model


USER_MESSAGE = Message(role="user", parts=(TextPart(text="weather in Paris and Oslo?"),))


async def test_thought_signatures_go_back_on_the_parts_they_came_on() -> None:
    async with ScriptedModel(wire("thought_signature_parallel_calls"), api="gemini") as server:
        model = gemini_model(server, thinking={"include_thoughts": True})
        first = await call(model, ModelRequest(messages=(USER_MESSAGE,), tools=(WEATHER,)))
        answer = finish_of(first).response.message
        results = Message(
            role="tool",
            parts=tuple(
                ToolResultPart(
                    tool_call_id=c.id, content=f"sunny in {json.loads(c.arguments)['city']}"
                )
                for c in answer.tool_calls
            ),
        )
        second = await call(
            model, ModelRequest(messages=(USER_MESSAGE, answer, results), tools=(WEATHER,))
        )
    thought, marker, paris, oslo = answer.parts
    assert thought == ReasoningPart(
        text="**Finding the weather**\n\nThe user wants Paris.", id="thought", provider="gemini"
    )
    assert marker == ReasoningPart(text="", signature=SIG, provider="gemini")
    assert isinstance(paris, ToolCall)
    assert isinstance(oslo, ToolCall)
    assert (paris.name, paris.arguments, oslo.arguments) == (
        "get_weather",
        '{"city": "Paris"}',
        '{"city": "Oslo"}',
    )
    assert finish_of(first).reason == "tool_calls"
    usage = finish_of(first).response.usage
    assert usage is not None
    # candidates (30) plus thoughts (96), as Chat Completions counts completion tokens
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (64, 126, 32)
    assert usage.reasoning_tokens == 96
    final = finish_of(second).response.message
    assert final.text == "Sunny in Paris and in Oslo."
    assert final.parts[-2:] == (
        ReasoningPart(text="", signature=SIG2, provider="gemini"),
        TextPart(text="Sunny in Paris and in Oslo."),
    )
    body = server.requests[1]
    # the SDK writes the field as it names it; the API's JSON reader takes either spelling
    assert list(body["generationConfig"]["thinkingConfig"].values()) == [True]
    model_turn, responses = body["contents"][1:]
    assert model_turn["role"] == "model"
    sent_thought, sent_paris, sent_oslo = model_turn["parts"]
    assert sent_thought["thought"] is True
    assert sent_paris["functionCall"] == {"name": "get_weather", "args": {"city": "Paris"}}
    assert same_bytes(sent_paris["thoughtSignature"], SIG)
    assert "thoughtSignature" not in sent_oslo  # only the first call of a turn had one
    assert responses["role"] == "user"
    assert [p["functionResponse"]["response"] for p in responses["parts"]] == [
        {"output": "sunny in Paris"},
        {"output": "sunny in Oslo"},
    ]
    # the calls came without ids: none is made up on the wire
    assert all("id" not in p["functionResponse"] for p in responses["parts"])


async def test_through_the_loop_the_first_call_goes_back_with_its_own_thought_signature() -> None:
    """The loop keeps neutral messages (docs/agent.md, "The model seam"), so the signature the
    model gave goes back as it came, not the placeholder for a lost one."""
    tools = Tools()
    async with ScriptedModel(wire("thought_signature_parallel_calls"), api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        events = await collect(agent, USER, tool_manager=tools.manager(), session_context=AUTO)
    done = done_of(events)
    assert_settled_once(done.messages)
    assert done.reason == "stop"
    assert sorted(c[1]["city"] for c in tools.calls) == ["Oslo", "Paris"]
    assert done.messages[-1]["content"] == "Sunny in Paris and in Oslo."
    reasoning = "".join(e.delta for e in events if isinstance(e, ReasoningDeltaEvent))
    assert reasoning == "**Finding the weather**\n\nThe user wants Paris."
    model_turn = server.requests[1]["contents"][1]
    thought, first_call, second_call = model_turn["parts"]
    assert thought["thought"] is True
    assert first_call["functionCall"]["name"] == "get_weather"
    assert first_call["thoughtSignature"].startswith("CiQB0e2Kb3Nc8kqG")
    assert "thoughtSignature" not in second_call
    assert next(u.reasoning_tokens for u in events if isinstance(u, UsageEvent)) == 96


async def test_ids_given_to_calls_gemini_sent_without_one_pass_mistral_s_rule() -> None:
    """A history made with Gemini can go on to any server of the conformance suite, the
    strictest included (Mistral's: 9 characters [a-zA-Z0-9]); Gemini itself is never sent an
    id it did not give (endpoints refuse one: "Unknown name \"id\" at ...function_call")."""
    tools = Tools()
    async with ScriptedModel(wire("thought_signature_parallel_calls"), api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        events = await collect(agent, USER, tool_manager=tools.manager(), session_context=AUTO)
    done = done_of(events)
    assert done.reason == "stop"
    ids = [c["id"] for m in done.messages for c in m.get("tool_calls") or ()]
    assert len(ids) == len(set(ids)) == 2
    assert all(NINE_ALNUM.fullmatch(i) for i in ids), ids
    assert [m["tool_call_id"] for m in tool_messages(done.messages)] == ids
    sent = [p for c in server.requests[1]["contents"] for p in c["parts"]]
    assert [p["functionCall"] for p in sent if "functionCall" in p] == [
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"name": "get_weather", "args": {"city": "Oslo"}},
    ]
    assert all("id" not in p["functionResponse"] for p in sent if "functionResponse" in p)


async def test_a_429_waits_what_its_retry_info_says() -> None:
    async with ScriptedModel(wire("429_retry_info"), api="gemini") as server:
        agent = SAgent(model=server.chat_model(max_retry_wait=1), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Back again."
    assert len(server.requests) == 2


async def test_a_429_on_a_daily_quota_is_not_retried() -> None:
    async with ScriptedModel(wire("429_daily_quota"), api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_quota_exhausted"
    assert len(server.requests) == 1


async def test_a_history_with_no_message_for_contents_is_a_clear_error_sent_once() -> None:
    # a run with only a system prompt: google-genai refuses it before sending ("contents are
    # required."), which was retried with backoff as a broken stream, then "failed mid-answer"
    async with ScriptedModel([reply("never")], api="gemini") as server:
        agent = SAgent(model=server.chat_model(), system_prompt="Write a haiku.", run_script=False)
        done = done_of(await collect(agent, [], tool_manager=Tools().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_error"
    assert "contents" in done.error["message"]
    assert "mid-answer" not in done.error["message"]
    assert "attempts" not in done.error["details"]


async def test_max_tokens_with_a_call_runs_nothing_and_says_so() -> None:
    # a call in the chunk that ends MAX_TOKENS may be cut: no call of that answer runs
    chunk = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Pa"}}}],
                },
                "finishReason": "MAX_TOKENS",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5},
    }
    cut = WireReply(body=(f"data: {json.dumps(chunk)}\r\n\r\n",))
    tools = Tools()
    async with ScriptedModel([cut, reply("done")], api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(
            await collect(agent, USER, tool_manager=tools.manager(), session_context=AUTO)
        )
    assert done.reason == "stop"
    assert tools.calls == []
    (result,) = tool_messages(done.messages)
    assert "output_truncated" in result["content"]


async def test_a_malformed_function_call_is_not_an_answer_and_is_tried_again() -> None:
    async with ScriptedModel(wire("malformed_function_call"), api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Back again."
    assert len(server.requests) == 2
    (malformed, _answer) = wire("malformed_function_call")
    async with ScriptedModel([malformed], api="gemini") as server:
        agent = SAgent(model=server.chat_model(max_retries=0), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert "MALFORMED_FUNCTION_CALL" in done.error["message"]


async def test_an_answer_with_no_content_at_all_is_asked_for_once_more() -> None:
    """https://github.com/google-gemini/deprecated-generative-ai-python/issues/744: Gemini 2.5
    and 3 sometimes answer a candidate whose content is only its role, finishReason STOP, and
    answer when asked again; the run ended ``stop`` with an empty answer. It is asked for once
    more; a second empty answer is the answer (a model told to stay quiet answers so:
    https://github.com/rezaho/MARSYS/pull/48), not an error."""
    async with ScriptedModel(wire("empty_answer_stop"), api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "Here are the blocks."
    assert len(server.requests) == 2
    (empty, _answer) = wire("empty_answer_stop")
    async with ScriptedModel([empty, empty, reply("never")], api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "stop", done.error
    assert done.messages[-1] == {"role": "assistant", "content": ""}
    assert len(server.requests) == 2


async def test_a_config_the_sdk_refuses_is_an_error_before_anything_is_sent() -> None:
    # the SDK's ValueError is not retried as a broken answer: the adapter names what the SDK
    # refused; and it is refused on every call, not only the first
    async with ScriptedModel([], api="gemini") as server:
        model = gemini_model(server, thinking={"include_thoughts": "not a boolean"})
        for _ in range(2):
            with pytest.raises(pydantic.ValidationError, match="include_thoughts"):
                await call(model, ModelRequest(messages=(USER_MESSAGE,), tools=(WEATHER,)))
        assert server.requests == []


async def test_contents_the_sdk_refuses_are_an_error_before_anything_is_sent() -> None:
    # a message the SDK refuses (text that is not a string) is refused on every call, after
    # a valid one, naming the content (not the SDK's list of every form a content may take)
    wrong = Message(role="user", parts=(TextPart(text=123),))  # type: ignore[arg-type]
    async with ScriptedModel([reply("fine")], api="gemini") as server:
        model = gemini_model(server)
        await call(model, ModelRequest(messages=(USER_MESSAGE,)))
        for _ in range(2):
            with pytest.raises(pydantic.ValidationError, match="1 validation error for Content\n"):
                await call(model, ModelRequest(messages=(USER_MESSAGE, wrong)))
        assert len(server.requests) == 1


def test_a_call_whose_arguments_hold_a_raw_newline_goes_back_with_them() -> None:
    # a history from a server whose grammar let a raw newline into a JSON string
    # (llama-cpp-python, docs/agent.md "Quirks handled"): the call ran with those arguments
    model = GeminiModel("gemini-2.5-flash", api_key="k", base_url="http://127.0.0.1:9")
    answer = Message(
        role="assistant",
        parts=(ToolCall(id="c1", name="note", arguments='{"text": "two\nlines"}'),),
    )
    result = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", content="ok"),))
    contents, _config = model.request_parts(ModelRequest(messages=(USER_MESSAGE, answer, result)))
    call = contents[1]["parts"][0]["function_call"]
    assert call == {"name": "note", "args": {"text": "two\nlines"}, "id": "c1"}


def test_names_and_parameters_gemini_refuses_are_declared_and_mapped_back() -> None:
    spec = ToolSpec(
        name="9lives",
        description="Count lives.",
        input_schema={"type": "object", "properties": {"max-results": {"type": "integer"}}},
    )
    model = GeminiModel("gemini-2.5-flash", api_key="k", base_url="http://127.0.0.1:9")
    answer = Message(
        role="assistant",
        parts=(ToolCall(id="c1", name="9lives", arguments='{"max-results": 3}'),),
    )
    result = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", content="9"),))
    contents, config = model.request_parts(
        ModelRequest(
            messages=(USER_MESSAGE, answer, result),
            tools=(spec,),
            settings=ModelSettings(tool_choice="9lives", temperature=0.1),
        )
    )
    (declaration,) = config["tools"][0]["function_declarations"]
    assert declaration["name"] == "_9lives"
    assert list(declaration["parameters"]["properties"]) == ["max_results"]
    assert config["tool_config"] == {
        "function_calling_config": {"mode": "ANY", "allowed_function_names": ["_9lives"]}
    }
    call = contents[1]["parts"][0]["function_call"]
    assert call == {"name": "_9lives", "args": {"max_results": 3}, "id": "c1"}
    assert contents[2]["parts"][0]["function_response"]["name"] == "_9lives"


def test_a_parameter_gemini_refuses_deep_in_a_schema_is_mapped_on_every_request() -> None:
    # the adapter keeps which tools have renamed parameters: one under a $ref counts, and a
    # tool without any sends its arguments as they are
    nested = ToolSpec(
        name="search",
        description="Search.",
        input_schema={
            "type": "object",
            "properties": {"filter": {"$ref": "#/$defs/Filter"}},
            "$defs": {
                "Filter": {"type": "object", "properties": {"max-results": {"type": "integer"}}}
            },
        },
    )
    model = GeminiModel("gemini-2.5-flash", api_key="k", base_url="http://127.0.0.1:9")
    answer = Message(
        role="assistant",
        parts=(
            ToolCall(id="c1", name="search", arguments='{"filter": {"max-results": 3}}'),
            ToolCall(id="c2", name="get_weather", arguments='{"city": "Oslo"}'),
        ),
    )
    results = Message(
        role="tool",
        parts=(
            ToolResultPart(tool_call_id="c1", content="none"),
            ToolResultPart(tool_call_id="c2", content="snow"),
        ),
    )
    request = ModelRequest(messages=(USER_MESSAGE, answer, results), tools=(nested, WEATHER))
    for _ in range(2):  # the second from what the adapter kept
        contents, _config = model.request_parts(request)
        calls = [part["function_call"] for part in contents[1]["parts"]]
        assert calls[0]["args"] == {"filter": {"max_results": 3}}
        assert calls[1]["args"] == {"city": "Oslo"}


async def test_a_call_under_a_declared_name_comes_back_under_the_tool_s_own() -> None:
    chunk = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "_9lives", "args": {"max_results": 2}}}],
                },
                "finishReason": "STOP",
            }
        ]
    }
    spec = ToolSpec(
        name="9lives",
        description="Count lives.",
        input_schema={"type": "object", "properties": {"max-results": {"type": "integer"}}},
    )
    async with ScriptedModel(
        [WireReply(body=(f"data: {json.dumps(chunk)}\r\n\r\n",))], api="gemini"
    ) as server:
        model = gemini_model(server)
        events = await call(model, ModelRequest(messages=(USER_MESSAGE,), tools=(spec,)))
    (made,) = finish_of(events).response.message.tool_calls
    assert (made.name, json.loads(made.arguments)) == ("9lives", {"max-results": 2})
    assert NINE_ALNUM.fullmatch(made.id), made.id


def test_one_answer_s_results_and_the_user_s_next_words_are_one_user_content() -> None:
    model = GeminiModel("gemini-2.5-flash", api_key="k", base_url="http://127.0.0.1:9")
    answer = Message(
        role="assistant",
        parts=(
            ToolCall(id="a", name="get_weather", arguments='{"city": "Paris"}'),
            ToolCall(id="b", name="get_weather", arguments='{"city": "Oslo"}'),
        ),
    )
    history = (
        USER_MESSAGE,
        answer,
        Message(role="tool", parts=(ToolResultPart(tool_call_id="a", content="sunny"),)),
        Message(role="tool", parts=(ToolResultPart(tool_call_id="b", content="rain"),)),
        Message(role="user", parts=(TextPart(text="and tomorrow?"),)),
    )
    contents, _config = model.request_parts(ModelRequest(messages=history, tools=(WEATHER,)))
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[2]["parts"] == [
        {"function_response": {"name": "get_weather", "response": {"output": "sunny"}, "id": "a"}},
        {"function_response": {"name": "get_weather", "response": {"output": "rain"}, "id": "b"}},
        {"text": "and tomorrow?"},
    ]
    # the turn's first call had no signature to keep: it goes with the documented placeholder
    assert contents[1]["parts"][0]["thought_signature"] == base64.urlsafe_b64decode(
        "skip_thought_signature_validator"
    )
    assert "thought_signature" not in contents[1]["parts"][1]


async def _comment_free(chunks: list[bytes]) -> bytes:
    class Chunks(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

    return b"".join([piece async for piece in _CommentFree(Chunks())])


_SSE_LINES = st.lists(
    st.sampled_from([b'data: {"a": 1}', b": keep-alive", b"", b":", b"event: x", b"data: :"]),
    max_size=12,
)


@given(lines=_SSE_LINES, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_sse_comment_lines_are_dropped_however_the_stream_is_cut(
    lines: list[bytes], cuts: list[int]
) -> None:
    # google-genai takes a comment line (": keep-alive") for JSON; the transport drops them,
    # whether a chunk holds whole lines (passed on as they came) or cuts lines anywhere
    body = b"".join(line + b"\n" for line in lines)
    bounds = sorted({min(cut, len(body)) for cut in cuts} | {0, len(body)})
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds)]
    expected = b"".join(line + b"\n" for line in lines if not line.startswith(b":"))
    assert anyio.run(_comment_free, chunks) == expected

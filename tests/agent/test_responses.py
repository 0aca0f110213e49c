"""``OpenAIResponsesModel`` through the real ``openai`` SDK's responses client against recorded
Responses API streams.

Each fixture ``tests/agent/wire/responses_*.json`` is written from the API's documented stream
and the bug reports it names, played back by ``ScriptedModel`` on 127.0.0.1 as named SSE
events. docs/agent.md, "OpenAIResponsesModel", lists what the adapter handles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sagents.agent import (
    Message,
    ModelRequest,
    ModelSettings,
    OpenAIResponsesModel,
    ReasoningDeltaEvent,
    ReasoningPart,
    SAgent,
    TextPart,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolResultPart,
    UsageEvent,
)
from sagents.core._spec import ToolSpec
from sagents.testing import ScriptedModel, WireReply, load_wire
from tests.agent.helpers import (
    assert_settled_once,
    collect,
    done_of,
    finish_of,
    tool_messages,
)
from tests.agent.helpers import model_events as call
from tests.agent.test_servers import AUTO, USER, Tools

pytestmark = pytest.mark.anyio

WIRE = Path(__file__).parent / "wire"
WEATHER = ToolSpec(
    name="get_weather",
    description="The weather of a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
RS = "rs_68af40334a6c8193b3ae0bfc6b36d1e60f"
FC = "fc_68af4034b1d48193a9d1e5e9ff5c0f4e0f"
CALL = "call_Q0mQpYkE6f5hD2o1nR3sT4uV"
ENC = "gAAAAABor0AzqK3n8Xb1Wq7YkVwS2o0JmCqC1pXr8m-9V_y4tYt0aZ3cEr1pYw=="


def wire(name: str) -> list[WireReply]:
    return load_wire(WIRE / f"responses_{name}.json")


def responses_model(server: ScriptedModel, **options: Any) -> OpenAIResponsesModel:
    model = server.chat_model(**options)
    assert isinstance(model, OpenAIResponsesModel)
    return model


USER_MESSAGE = Message(role="user", parts=(TextPart(text="weather in Paris?"),))


async def test_reasoning_items_are_kept_whole_and_sent_back_paired_with_their_call() -> None:
    async with ScriptedModel(wire("reasoning_tool_call"), api="responses") as server:
        model = responses_model(server, reasoning={"effort": "low", "summary": "auto"})
        first = await call(model, ModelRequest(messages=(USER_MESSAGE,), tools=(WEATHER,)))
        answer = finish_of(first).response.message
        result = Message(role="tool", parts=(ToolResultPart(tool_call_id=CALL, content="sunny"),))
        second = await call(
            model, ModelRequest(messages=(USER_MESSAGE, answer, result), tools=(WEATHER,))
        )
    assert answer.parts == (
        ReasoningPart(
            text="**Checking the weather**\n\nThe user asks for Paris.",
            id=RS,
            provider="openai-responses",
        ),
        ReasoningPart(
            text="I will call get_weather.", id=RS, signature=ENC, provider="openai-responses"
        ),
        ToolCall(id=CALL, name="get_weather", arguments='{"city":"Paris"}', item_id=FC),
    )
    pieces = [e.arguments for e in first if isinstance(e, ToolCallArgumentsDelta)]
    assert pieces == ['{"city":', '"Paris"}']
    usage = finish_of(first).response.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.cached_tokens, usage.reasoning_tokens) == (81, 64, 128)
    assert finish_of(first).reason == "tool_calls"
    assert finish_of(second).response.message.text == "It is sunny in Paris."
    body = server.requests[1]
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"][1:] == [
        {
            "type": "reasoning",
            "id": RS,
            "summary": [
                {
                    "type": "summary_text",
                    "text": "**Checking the weather**\n\nThe user asks for Paris.",
                },
                {"type": "summary_text", "text": "I will call get_weather."},
            ],
            "encrypted_content": ENC,
        },
        {
            "type": "function_call",
            "call_id": CALL,
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "id": FC,
        },
        {"type": "function_call_output", "call_id": CALL, "output": "sunny"},
    ]


async def test_through_the_loop_a_call_goes_back_with_its_reasoning_item_and_its_item_id() -> None:
    # The loop keeps neutral messages: the reasoning item (with its encrypted content) goes
    # back before the call, which keeps its fc_ id (the API refuses the id without the item).
    tools = Tools()
    async with ScriptedModel(wire("reasoning_tool_call"), api="responses") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        events = await collect(agent, USER, tool_manager=tools.manager(), session_context=AUTO)
    done = done_of(events)
    assert_settled_once(done.messages)
    assert done.reason == "stop"
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    reasoning = "".join(e.delta for e in events if isinstance(e, ReasoningDeltaEvent))
    assert (
        reasoning == "**Checking the weather**\n\nThe user asks for Paris.I will call get_weather."
    )
    second = server.requests[1]["input"]
    assert [item.get("type", "message") for item in second] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert second[1]["id"].startswith("rs_")
    assert second[1]["encrypted_content"]
    assert second[2]["id"].startswith("fc_")
    assert second[2]["call_id"] == CALL
    assert next(
        (e.prompt_tokens, e.reasoning_tokens) for e in events if isinstance(e, UsageEvent)
    ) == (81, 128)


def test_reasoning_that_cannot_be_sent_is_left_out_with_the_item_ids() -> None:
    model = OpenAIResponsesModel(
        "gpt-5", api_key="k", base_url="http://127.0.0.1:9/v1", store=False
    )
    answer = Message(
        role="assistant",
        parts=(
            ReasoningPart(text="thinking", id=RS, provider="openai-responses"),  # no content
            TextPart(text="Let me check.", item_id="msg_1"),
            ToolCall(id=CALL, name="get_weather", arguments="", item_id=FC),
        ),
    )
    body = model.request_body(ModelRequest(messages=(USER_MESSAGE, answer)))
    assert body["store"] is False
    assert body["input"][1:] == [
        {"type": "message", "role": "assistant", "content": "Let me check."},
        {"type": "function_call", "call_id": CALL, "name": "get_weather", "arguments": "{}"},
    ]


def test_settings_map_to_the_responses_fields() -> None:
    model = OpenAIResponsesModel("gpt-5", api_key="k", base_url="http://127.0.0.1:9/v1")
    body = model.request_body(
        ModelRequest(
            system_prompt="Be brief.",
            messages=(USER_MESSAGE,),
            tools=(WEATHER,),
            settings=ModelSettings(
                temperature=0.3, max_tokens=50, parallel_tool_calls=False, tool_choice="get_weather"
            ),
        )
    )
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"role": "user", "content": "weather in Paris?"}]
    assert body["max_output_tokens"] == 50
    assert body["temperature"] == 0.3
    assert body["parallel_tool_calls"] is False
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": False,
        }
    ]


async def test_max_output_tokens_inside_a_call_runs_nothing_and_says_so() -> None:
    tools = Tools()
    async with ScriptedModel(wire("incomplete_in_function_call"), api="responses") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        events = await collect(agent, USER, tool_manager=tools.manager(), session_context=AUTO)
    done = done_of(events)
    assert_settled_once(done.messages)
    assert tools.calls == []
    (result,) = tool_messages(done.messages)
    assert result["tool_call_id"] == "call_Cut9aa1b2c3"
    assert "length" in result["content"]
    # the follow-up's response.completed has an empty output: its items come from the stream
    assert done.messages[-1]["content"] == "I ran out of room; nothing was saved."


async def test_a_failed_response_with_a_server_error_is_retried() -> None:
    async with ScriptedModel(wire("failed_then_answer"), api="responses") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "It is sunny in Paris."
    assert len(server.requests) == 2


async def test_a_stream_that_ends_without_its_last_event_is_not_an_answer() -> None:
    (whole, _answer) = wire("reasoning_tool_call")
    cut = WireReply(body=whole.body[:-1])  # everything but response.completed
    async with ScriptedModel([cut, cut], api="responses") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert "response.completed" in done.error["message"]
    assert len(server.requests) == 1  # part of it was passed on: not sent again


@pytest.mark.parametrize("index", [0, 1], ids=["items-empty", "items-last-token"])
async def test_the_streamed_text_is_the_answer_when_the_finished_items_lack_it(index: int) -> None:
    """https://github.com/agentgateway/agentgateway/pull/2281 and
    https://github.com/vllm-project/vllm/pull/30223: the text streamed in
    ``response.output_text.delta`` while the finished item and ``response.completed`` carry
    none of it (or only the last token): the history kept an empty (or wrong) answer although
    the consumer saw the whole text."""
    recorded = wire("text_only_in_deltas")[index]
    async with ScriptedModel([recorded], api="responses") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER))
    assert done.reason == "stop", done.error
    assert done.messages[-1]["content"] == "2 + 2 is 4."

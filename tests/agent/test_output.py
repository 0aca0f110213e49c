"""``SAgent(output_type=...)``: the type as a schema each adapter asks for, the answer validated
into it (the conformance suite runs the same on every adapter; here: the types pydantic takes,
the bad ones, and the choices each API's schema rules force)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from sagents.agent import MessageDeltaEvent, ModelRequest, SAgent
from sagents.agent._anthropic import AnthropicModel
from sagents.agent._output import OutputType, anthropic_output_config, openai_json_schema
from sagents.testing import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    WireReply,
    load_wire,
    reply,
)
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.helpers import collect, done_of, json_answer

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]
WIRE = Path(__file__).parent / "wire"


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: int
    label: str = "box"


class Report(BaseModel):
    """A report."""

    title: str
    scores: dict[str, int]  # an open map: beyond the strict subsets


async def test_run_returns_the_validated_value_of_a_typed_dict() -> None:
    async with ScriptedModel([reply('{"x": 1, "y": 2}')]) as server:
        agent = SAgent(model=server.chat_model(), run_script=False, output_type=Point)
        result = await agent.run(USER)
    assert result.reason == "stop"
    assert result.output == {"x": 1, "y": 2}


async def test_run_returns_the_validated_value_of_a_dataclass_with_its_defaults() -> None:
    async with ScriptedModel([reply('```json\n{"width": 3}\n```')]) as server:
        agent = SAgent(model=server.chat_model(), run_script=False, output_type=Box)
        result = await agent.run(USER)
    assert result.output == Box(width=3, label="box")
    # an optional property: OpenAI's strict mode would make it a nullable required one
    sent = server.requests[0]["response_format"]["json_schema"]
    assert sent["strict"] is False
    assert sent["schema"]["required"] == ["width"]


async def test_without_output_type_the_output_stays_the_text() -> None:
    async with ScriptedModel([reply('{"x": 1}')]) as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        result = await agent.run(USER)
    assert result.output == '{"x": 1}'
    assert "response_format" not in server.requests[0]


def test_a_type_whose_schema_is_not_an_object_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="not an object type"):
        OutputType(list[int])
    with pytest.raises(ValueError, match="has no JSON Schema"):
        OutputType(object())


def test_negative_output_retries_are_refused() -> None:
    with pytest.raises(ValueError, match="output_retries"):
        SAgent(model="openai:m", output_retries=-1, output_type=Point)


def test_a_schema_with_every_property_required_is_sent_strict() -> None:
    body = openai_json_schema(OutputType(Point).schema)
    assert body["strict"] is True
    assert body["schema"]["additionalProperties"] is False
    assert body["name"] == "Point"


def test_an_answer_that_is_not_json_fails_validation() -> None:
    with pytest.raises(ValidationError):
        OutputType(Point).validate("the point is (1, 2)")


def test_anthropic_asks_in_the_prompt_for_a_schema_beyond_its_strict_subset() -> None:
    output = OutputType(Report).schema
    assert anthropic_output_config(output) is None
    model = AnthropicModel("claude-x", api_key="k", base_url="http://127.0.0.1:9")
    body: dict[str, Any] = model.request_body(
        ModelRequest(system_prompt="Be brief.", output=output)
    )
    assert "output_config" not in body
    assert body["system"].startswith("Be brief.\n\n")
    schema = json.loads(body["system"].split("no other text:\n", 1)[1])
    assert schema["properties"]["scores"]["additionalProperties"] == {"type": "integer"}
    strict = anthropic_output_config(OutputType(Point).schema)
    assert strict is not None
    assert strict["format"]["schema"]["additionalProperties"] is False


class Node(BaseModel):
    """A tree: pydantic's schema of a recursive model is a root ``$ref`` into ``$defs``."""

    name: str
    children: list[Node]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic", "gemini"])
async def test_a_recursive_model_is_asked_for_as_an_object_and_validated(api: str) -> None:
    answer = '{"name": "root", "children": [{"name": "leaf", "children": []}]}'
    async with ScriptedModel([reply(answer)], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(), run_script=False, output_type=Node)
        result = await agent.run(USER)
    assert result.reason == "stop"
    assert result.output == Node(name="root", children=[Node(name="leaf", children=[])])
    body = server.requests[0]
    if api == "chat":  # OpenAI: the root of a response format's schema is an object
        schema = body["response_format"]["json_schema"]["schema"]
    elif api == "responses":
        schema = body["text"]["format"]["schema"]
    elif api == "anthropic":  # a recursive type is beyond its strict subset: in the prompt
        schema = json.loads(body["system"].split("no other text:\n", 1)[1])
    else:  # Gemini unrolls cycles only through optional properties: in the prompt too
        assert "responseMimeType" not in body.get("generationConfig", {})
        instruction = body["systemInstruction"]["parts"][0]["text"]
        schema = json.loads(instruction.split("no other text:\n", 1)[1])
    assert schema["type"] == "object"
    assert "$ref" not in schema
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert set(schema["$defs"]["Node"]["properties"]) == {"name", "children"}


class Forecast(BaseModel):
    city: str
    temperature: int


# Gemini models before Gemini 3: HTTP 400 for a JSON answer format beside function declarations
# (https://github.com/googleapis/python-genai/issues/867; "Tool use with ..." in other versions)
JSON_BESIDE_TOOLS = json_answer(
    400,
    {
        "error": {
            "code": 400,
            "message": "Function calling with a response mime type: 'application/json' is "
            "unsupported",
            "status": "INVALID_ARGUMENT",
        }
    },
)


async def test_gemini_refusing_a_json_answer_beside_tools_gets_the_schema_in_the_prompt() -> None:
    answers = [
        ScriptedReply(tool_calls=(ScriptedToolCall(name="get_weather", arguments={"city": "P"}),)),
        reply('{"city": "Paris", "temperature": 21}'),
    ]

    def gemini_2_5(body: dict[str, Any]) -> ScriptedReply | WireReply:
        native = "responseMimeType" in (body.get("generationConfig") or {})
        if native and body.get("tools"):
            return JSON_BESIDE_TOOLS
        return answers.pop(0)

    @tool(permission="read_only")
    async def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    manager = ToolManager()
    manager.register_tool(get_weather)
    async with ScriptedModel(gemini_2_5, api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False, output_type=Forecast)
        result = await agent.run(
            USER, tool_manager=manager, session_context=SessionContext(permission_mode="auto")
        )
    assert result.reason == "stop", result.error
    assert result.output == Forecast(city="Paris", temperature=21)
    assert len(server.requests) == 3  # refused once; the adapter remembers it for the run
    for body in server.requests[1:]:
        assert "responseMimeType" not in body.get("generationConfig", {})
        instruction = json.dumps(body["systemInstruction"])
        assert "only a JSON object that fits this JSON Schema" in instruction
        assert "temperature" in instruction


async def test_gemini_without_tools_keeps_the_native_json_answer_format() -> None:
    async with ScriptedModel(
        [reply('{"city": "Paris", "temperature": 21}')], api="gemini"
    ) as server:
        agent = SAgent(model=server.chat_model(), run_script=False, output_type=Forecast)
        result = await agent.run(USER)
    assert result.output == Forecast(city="Paris", temperature=21)
    assert server.requests[0]["generationConfig"]["responseMimeType"] == "application/json"


def _cut_answer(text: str) -> WireReply:
    """A whole Chat Completions answer that the output limit cut (``finish_reason: length``)."""
    return json_answer(
        200,
        {
            "id": "chatcmpl-cut",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 16, "total_tokens": 26},
        },
    )


async def test_a_structured_answer_cut_by_the_output_limit_is_told_so() -> None:
    script: list[ScriptedReply | WireReply] = [
        _cut_answer('{"city": "Paris", "temperat'),
        reply('{"city": "P", "temperature": 2}'),
    ]
    async with ScriptedModel(script) as server:
        agent = SAgent(
            model=server.chat_model(stream=False), run_script=False, output_type=Forecast
        )
        result = await agent.run(USER)
    assert result.output == Forecast(city="P", temperature=2)
    told = server.requests[1]["messages"][-1]["content"]
    assert "output limit" in told  # not only "Invalid JSON": the same answer would be cut again
    assert "shorter" in told


async def test_a_structured_answer_cut_every_time_ends_saying_the_limit_cut_it() -> None:
    cut = _cut_answer('{"city": "Paris", "temperat')
    async with ScriptedModel([cut, cut]) as server:
        agent = SAgent(
            model=server.chat_model(stream=False), run_script=False, output_type=Forecast
        )
        result = await agent.run(USER)
    assert result.reason == "error"
    assert result.error is not None
    assert result.error["code"] == "output_invalid"
    assert "output limit" in result.error["message"]
    assert "max_tokens" in str(result.error.get("hint"))


class Inner(BaseModel):
    x: int


class Outer(BaseModel):
    inner: Inner = Field(description="the inner one")  # pydantic: a $ref with a sibling
    maybe: Inner | None = None


def _refs_with_siblings(node: Any) -> list[dict[str, Any]]:
    """The nodes that set ``$ref`` beside a keyword not starting with ``$``."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "$ref" in node and any(not key.startswith("$") for key in node):
            found.append(node)
        for value in node.values():
            found += _refs_with_siblings(value)
    elif isinstance(node, list):
        for value in node:
            found += _refs_with_siblings(value)
    return found


async def test_gemini_gets_a_response_json_schema_within_its_documented_rules() -> None:
    # Gemini API reference, GenerationConfig.responseJsonSchema: "If $ref is set on a
    # sub-schema, no other properties, except for those starting as a $, may be set."
    answer = '{"inner": {"x": 1}, "maybe": null}'
    async with ScriptedModel([reply(answer)], api="gemini") as server:
        agent = SAgent(model=server.chat_model(), run_script=False, output_type=Outer)
        result = await agent.run(USER)
    assert result.output == Outer(inner=Inner(x=1), maybe=None)
    schema = server.requests[0]["generationConfig"]["responseJsonSchema"]
    assert _refs_with_siblings(schema) == []
    assert schema["properties"]["inner"]["description"] == "the inner one"
    assert schema["properties"]["inner"]["properties"]["x"]["type"] == "integer"


REFUSAL = "I'm sorry, I cannot assist with that request."


@pytest.mark.parametrize("case", ["chat-stream", "chat-whole", "responses-stream"])
async def test_a_refusal_is_the_answer_and_ends_the_run_saying_it(case: str) -> None:
    # OpenAI Structured Outputs: a refusal comes as the message's `refusal`, not as content
    streamed, whole, responses = load_wire(WIRE / "openai_structured_refusal.json")
    answer = {"chat-stream": streamed, "chat-whole": whole, "responses-stream": responses}[case]
    api = case.split("-")[0]
    async with ScriptedModel([answer, answer], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(stream=case.endswith("stream")),
            run_script=False,
            output_type=Forecast,
        )
        events = await collect(agent, USER)
    done = done_of(events)
    shown = "".join(e.delta for e in events if isinstance(e, MessageDeltaEvent))
    assert shown == REFUSAL * 2  # each refusal reached the consumer
    assert done.messages[1]["content"] == REFUSAL
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "output_invalid"
    assert done.error["details"]["answer"] == REFUSAL

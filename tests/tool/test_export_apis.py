"""Exports for the OpenAI Responses, Anthropic Messages and Gemini APIs, and their calls back.

Shapes are checked against the official SDKs' own types (``openai`` and ``anthropic``
TypedDicts through pydantic, ``google-genai``'s pydantic models, which forbid unknown fields);
calls go from each API's tool-call shape through ``run_tool`` to that API's result shape.
"""

from __future__ import annotations

import logging
from typing import Any

import pydantic
import pytest

from sagents.core._result import ImageContent, TextContent, ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SchemaExportError
from sagents.tool import ToolManager, ToolProxy
from sagents.tool._export_calls import ModelToolCall
from sagents.tool._handler import ToolCall
from sagents.tool.export_anthropic import (
    anthropic_strict_schema,
    anthropic_tool_result,
    parse_anthropic_tool_use,
    parse_anthropic_tool_uses,
)
from sagents.tool.export_gemini import (
    GEMINI_NAME_PATTERN,
    GEMINI_PARAMETER_NAME_PATTERN,
    gemini_function_name,
    gemini_function_response,
    gemini_schema,
    parse_gemini_function_call,
    parse_gemini_function_calls,
)
from sagents.tool.export_inline import MAX_INLINED_NODES
from sagents.tool.export_responses import (
    parse_responses_function_call,
    parse_responses_function_calls,
    responses_function_call_output,
)
from sagents.tool.naming import EXPORTED_NAME_PATTERN


def page(query: str, cursor: str | None = None, limit: int = 10) -> dict[str, Any]:
    """Search one page.

    Args:
        query: What to look for.
        cursor: Where the previous page ended.
        limit: Results per page.
    """
    return {"query": query, "cursor": cursor, "limit": limit}


class _Echo:
    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_structured({"tool": call.tool_name, "args": arguments})


def _manager(*names: str) -> ToolManager:
    tm = ToolManager()
    tm.register_tool(page)
    for name in names:
        schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
        tm.register_tool((ToolSpec(name=name, input_schema=schema), _Echo()))
    return tm


# -- shapes, validated by the official SDKs ------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_responses_tools_have_the_flat_shape_the_openai_sdk_types(strict: bool) -> None:
    openai_types = pytest.importorskip("openai.types.responses")
    tm = _manager("fleet.get/status")
    tools = tm.get_responses_tools(strict=strict)
    adapter = pydantic.TypeAdapter(openai_types.FunctionToolParam)
    for tool in tools:
        adapter.validate_python(tool)
        assert set(tool) == {"type", "name", "description", "parameters", "strict"}
        assert EXPORTED_NAME_PATTERN.match(tool["name"])
    chat = {t["function"]["name"]: t["function"] for t in tm.get_openai_tools(strict=strict)}
    for tool in tools:  # the same names and parameters as the Chat Completions export
        assert tool["parameters"] == chat[tool["name"]]["parameters"]
        assert tool["strict"] is chat[tool["name"]].get("strict", False)


@pytest.mark.parametrize("strict", [False, True])
def test_anthropic_tools_have_the_shape_the_anthropic_sdk_types(strict: bool) -> None:
    anthropic_types = pytest.importorskip("anthropic.types")
    tools = _manager("fleet.get/status").get_anthropic_tools(strict=strict)
    adapter = pydantic.TypeAdapter(anthropic_types.ToolParam)
    for tool in tools:
        adapter.validate_python(tool)
        assert tool["input_schema"]["type"] == "object"
        assert EXPORTED_NAME_PATTERN.match(tool["name"])
        assert tool.get("strict", False) is strict


@pytest.mark.parametrize("strict", [False, True])
def test_gemini_declarations_validate_as_google_genai_function_declarations(strict: bool) -> None:
    genai_types = pytest.importorskip("google.genai.types")
    tools = _manager("fleet.get/status", "9lives").get_gemini_tools(strict=strict)
    assert {t["name"] for t in tools} == {
        "page",
        gemini_function_name("fleet.get/status"),
        "_9lives",
    }
    for tool in tools:
        genai_types.FunctionDeclaration.model_validate(tool)  # unknown fields are refused
        assert GEMINI_NAME_PATTERN.match(tool["name"])
        assert tool["parameters"]["type"] == "OBJECT"


def test_the_page_tool_keeps_its_meaning_in_every_export() -> None:
    tm = _manager()
    anthropic = tm.get_anthropic_tools(strict=True)[0]["input_schema"]
    assert anthropic["required"] == ["query"]  # optional stays optional
    assert anthropic["additionalProperties"] is False
    gemini = tm.get_gemini_tools()[0]
    assert gemini["parameters"]["required"] == ["query"]
    assert gemini["parameters"]["properties"]["cursor"] == {
        "type": "STRING",
        "nullable": True,
        "description": "Where the previous page ended.",
    }
    gemini_strict = tm.get_gemini_tools(strict=True)[0]["parameters"]
    assert gemini_strict["required"] == ["query", "cursor", "limit"]
    assert gemini_strict["properties"]["limit"]["nullable"] is True


def test_a_tool_without_parameters_has_no_gemini_parameters() -> None:
    tm = ToolManager()
    tm.register_tool((ToolSpec(name="ping", input_schema={"type": "object"}), _Echo()))
    assert tm.get_gemini_tools() == [{"name": "ping", "description": ""}]


# -- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["ok", "9lives", "-dash", "a.b", "名前", "x" * 80, "9" * 70, "", "fleet__get"]
)
def test_gemini_names_are_valid_and_deterministic(name: str) -> None:
    exported = gemini_function_name(name)
    assert GEMINI_NAME_PATTERN.match(exported), exported
    assert gemini_function_name(name) == exported


def test_a_gemini_name_taken_by_a_tool_of_that_name_leaves_the_mapped_one_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tm = _manager("9x", "_9x")
    with caplog.at_level(logging.WARNING):
        names = [t["name"] for t in tm.get_gemini_tools()]
    assert names == ["_9x", "page"]
    assert "'9x'" in caplog.text


# -- what Gemini and Anthropic strict mode cannot express -----------------------------------


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "object", "properties": {"v": {}}}, "any type"),
        ({"type": "object", "properties": {"xs": {"type": "array"}}}, "any type"),
        (
            {"type": "object", "properties": {"m": {"type": "object"}}},
            "no fixed properties",
        ),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "open map"),
        (
            {
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/N"}},
                "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
            },
            "recursive",
        ),
        (
            {
                "type": "object",
                "anyOf": [
                    {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "string"}}, "required": ["b"]},
                ],
            },
            "at its root",
        ),
    ],
)
def test_gemini_refuses_what_it_cannot_declare(schema: dict[str, Any], words: str) -> None:
    with pytest.raises(SchemaExportError, match=words):
        gemini_schema(schema)


def test_a_tool_gemini_cannot_declare_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tm = _manager()
    schema = {"type": "object", "properties": {"v": {}}}
    tm.register_tool((ToolSpec(name="anything", input_schema=schema), _Echo()))
    with caplog.at_level(logging.WARNING):
        assert [t["name"] for t in tm.get_gemini_tools(strict=True)] == ["page"]
    assert "'anything'" in caplog.text
    assert "Gemini" in caplog.text


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "object", "properties": {"v": {}}}, "any type"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "open map"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": True,
            },
            "other properties",
        ),
        (
            {"type": "object", "properties": {"e": {"enum": [[1], {"a": 1}]}}},
            "enum",
        ),
        (
            {
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/N"}},
                "$defs": {"N": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
            },
            "recursive",
        ),
    ],
)
def test_anthropic_strict_mode_refuses_what_it_cannot_express(
    schema: dict[str, Any], words: str
) -> None:
    with pytest.raises(SchemaExportError, match=words):
        anthropic_strict_schema(schema)


def test_anthropic_strict_falls_back_to_faithful_for_that_tool_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tm = _manager()
    schema = {"type": "object", "properties": {"v": {}}}
    tm.register_tool((ToolSpec(name="anything", input_schema=schema), _Echo()))
    with caplog.at_level(logging.WARNING):
        tools = {t["name"]: t for t in tm.get_anthropic_tools(strict=True)}
    assert tools["page"]["strict"] is True
    assert "strict" not in tools["anything"]
    assert tools["anything"]["input_schema"] == {"type": "object", "properties": {"v": {}}}
    assert "'anything'" in caplog.text


def test_a_ladder_of_described_refs_is_refused_within_the_bound() -> None:
    depth = 24  # inlined, the ladder would hold 2**24 nodes
    defs: dict[str, Any] = {f"L{depth}": {"type": "string"}}
    for i in range(depth):
        rung = {"$ref": f"#/$defs/L{i + 1}", "description": f"rung {i}"}
        defs[f"L{i}"] = {"type": "object", "properties": {"a": rung, "b": rung}}
    schema = {"type": "object", "properties": {"top": {"$ref": "#/$defs/L0"}}, "$defs": defs}
    for export in (gemini_schema, anthropic_strict_schema):
        with pytest.raises(SchemaExportError, match=str(MAX_INLINED_NODES)):
            export(schema)


def test_a_schema_nested_too_deeply_is_an_export_error_not_a_crash() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(2000):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    for export in (gemini_schema, anthropic_strict_schema):
        with pytest.raises(SchemaExportError):
            export(schema)


# -- calls back: tool_use, function_call, functionCall --------------------------------------


@pytest.mark.anyio
async def test_an_anthropic_tool_use_block_runs_and_gets_its_tool_result() -> None:
    tm = _manager()
    block = {"type": "tool_use", "id": "toolu_1", "name": "page", "input": {"query": "q"}}
    [call] = parse_anthropic_tool_uses([{"type": "text", "text": "let me look"}, block], tm)
    result = await tm.run_tool(call.name, call.arguments, tool_call_id=call.tool_call_id)
    answer = anthropic_tool_result(call, result)
    assert answer == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": '{"query":"q","cursor":null,"limit":10}',
        "is_error": False,
    }
    anthropic_types = pytest.importorskip("anthropic.types")
    pydantic.TypeAdapter(anthropic_types.ToolResultBlockParam).validate_python(answer)


@pytest.mark.anyio
async def test_a_failed_anthropic_call_is_an_error_tool_result() -> None:
    tm = _manager()
    block = {"type": "tool_use", "id": "toolu_2", "name": "page", "input": {"limit": "many"}}
    call = parse_anthropic_tool_use(block, tm)
    answer = anthropic_tool_result(call, await tm.run_tool(call.name, call.arguments))
    assert answer["is_error"] is True
    assert answer["content"].startswith("Error [invalid_arguments]")


def test_an_sdk_tool_use_block_parses_like_its_json() -> None:
    anthropic_types = pytest.importorskip("anthropic.types")
    block = anthropic_types.ToolUseBlock(
        type="tool_use", id="toolu_3", name="page", input={"query": "q"}
    )
    call = parse_anthropic_tool_use(block)
    assert call == ModelToolCall(
        name="page", arguments={"query": "q"}, tool_call_id="toolu_3", sent_name="page"
    )


@pytest.mark.anyio
async def test_a_responses_function_call_runs_strictly_and_gets_its_output() -> None:
    tm = _manager()
    tm.get_responses_tools(strict=True)
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "page",
        "arguments": '{"query": "q", "cursor": null, "limit": null}',
    }
    [call] = parse_responses_function_calls([{"type": "reasoning"}, item], tm)
    assert call.arguments == item["arguments"]  # the JSON text: run_tool parses it
    result = await tm.run_tool(call.name, call.arguments, strict=True)
    answer = responses_function_call_output(call, result)
    assert answer == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": '{"query":"q","cursor":null,"limit":10}',
    }
    openai_types = pytest.importorskip("openai.types.responses.response_input_item_param")
    pydantic.TypeAdapter(openai_types.FunctionCallOutput).validate_python(answer)


def test_an_sdk_function_call_item_parses_like_its_json() -> None:
    openai_types = pytest.importorskip("openai.types.responses")
    item = openai_types.ResponseFunctionToolCall(
        type="function_call", call_id="call_2", name="page", arguments="{}"
    )
    call = parse_responses_function_call(item)
    assert (call.name, call.arguments, call.tool_call_id) == ("page", "{}", "call_2")


@pytest.mark.anyio
async def test_a_gemini_function_call_with_a_mapped_name_reaches_its_tool() -> None:
    tm = _manager("9lives")
    [declared] = [t["name"] for t in tm.get_gemini_tools() if t["name"] != "page"]
    part = {"functionCall": {"id": "c1", "name": declared, "args": {"x": 3}}}
    call = parse_gemini_function_call(part, tm)
    assert call.name == "9lives"
    result = await tm.run_tool(call.name, call.arguments, tool_call_id=call.tool_call_id)
    answer = gemini_function_response(call, result)
    assert answer == {
        "functionResponse": {
            "name": declared,
            "id": "c1",
            "response": {"output": '{"tool":"9lives","args":{"x":3}}'},
        }
    }
    genai_types = pytest.importorskip("google.genai.types")
    genai_types.Part.model_validate(answer)


@pytest.mark.anyio
async def test_a_gemini_sdk_part_parses_and_an_error_goes_under_error() -> None:
    genai_types = pytest.importorskip("google.genai.types")
    tm = _manager()
    part = genai_types.Part(function_call=genai_types.FunctionCall(name="page", args={}))
    call = parse_gemini_function_call(part, tm)
    assert call.tool_call_id is None
    answer = gemini_function_response(call, await tm.run_tool(call.name, call.arguments))
    assert list(answer["functionResponse"]["response"]) == ["error"]
    assert "id" not in answer["functionResponse"]


@pytest.mark.anyio
async def test_a_proxy_exports_and_resolves_only_the_whitelisted_tools() -> None:
    proxy = ToolProxy([_manager("9lives", "secret")], available_tools=["9lives", "page"])
    for tools in (proxy.get_responses_tools(), proxy.get_anthropic_tools()):
        assert [t["name"] for t in tools] == ["9lives", "page"]
    assert [t["name"] for t in proxy.get_gemini_tools(strict=True)] == ["_9lives", "page"]
    call = parse_gemini_function_call({"name": "_9lives", "args": {}}, proxy)
    assert call.name == "9lives"
    hidden = parse_anthropic_tool_use(
        {"type": "tool_use", "id": "t", "name": "secret", "input": {}}, proxy
    )
    result = await proxy.run_tool(hidden.name, hidden.arguments)
    assert result.error is not None
    assert result.error.code == "not_allowed"


def test_images_travel_as_image_parts_where_the_api_takes_them() -> None:
    result = ToolResult(
        content=(TextContent(text="a chart"), ImageContent(data="iVBORw0=", mime_type="image/png"))
    )
    call = ModelToolCall(name="plot", arguments={}, tool_call_id="id1", sent_name="plot")
    anthropic = anthropic_tool_result(call, result)["content"]
    assert anthropic[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0="},
    }
    responses = responses_function_call_output(call, result)["output"]
    assert responses[1] == {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0="}
    assert responses[0]["type"] == "input_text"
    assert "a chart" in responses[0]["text"]


@pytest.mark.parametrize(
    ("parse", "value"),
    [
        (parse_anthropic_tool_use, {"type": "text", "text": "hi"}),
        (parse_anthropic_tool_use, {"type": "tool_use", "name": "page", "input": {}}),
        (parse_responses_function_call, {"type": "function_call", "name": "page"}),
        (parse_gemini_function_call, {"text": "hi"}),
    ],
)
def test_a_block_that_is_not_a_tool_call_is_a_clear_error(parse: Any, value: Any) -> None:
    with pytest.raises(ValueError, match=r"expected|no Gemini functionCall"):
        parse(value)


def test_an_answer_needs_the_call_id_where_the_api_needs_it() -> None:
    call = ModelToolCall(name="page", arguments={}, tool_call_id=None, sent_name="page")
    result = ToolResult.from_text("ok")
    with pytest.raises(ValueError, match="id"):
        anthropic_tool_result(call, result)
    with pytest.raises(ValueError, match="call_id"):
        responses_function_call_output(call, result)
    assert gemini_function_response(call, result)["functionResponse"]["name"] == "page"


@pytest.mark.anyio
async def test_arguments_that_are_not_an_object_are_refused_not_dropped() -> None:
    tm = _manager("ping")  # "ping" has no required parameter: {} would run it
    block = {"type": "tool_use", "id": "t1", "name": "ping", "input": [1, 2]}
    call = parse_anthropic_tool_use(block, tm)
    result = await tm.run_tool(call.name, call.arguments)
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    gemini = parse_gemini_function_call({"functionCall": {"name": "ping"}}, tm)
    assert gemini.arguments == {}  # Gemini leaves out the args of a call without any


def test_exports_follow_a_replaced_tool_and_callers_get_fresh_copies() -> None:
    tm = _manager("ping")
    for export in (tm.get_responses_tools, tm.get_anthropic_tools, tm.get_gemini_tools):
        export()[0]["name"] = "changed"
        assert export()[0]["name"] == "page"
    schema = {"type": "object", "properties": {"y": {"type": "string"}}}
    tm.register_tool((ToolSpec(name="ping", input_schema=schema), _Echo()), replace=True)
    assert tm.get_gemini_tools()[1]["parameters"]["properties"] == {"y": {"type": "STRING"}}
    assert "y" in tm.get_anthropic_tools(strict=True)[1]["input_schema"]["properties"]
    tm.unregister_tool("ping")
    assert [t["name"] for t in tm.get_responses_tools()] == ["page"]


def test_gemini_rewrites_what_its_subset_lacks_and_notes_what_it_drops() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "email": {
                "anyOf": [{"type": "string", "format": "email"}, {"type": "null"}],
                "description": "Where to write.",
            },
            "kind": {"const": "fixed"},
            "mode": {"enum": ["fast", "slow", None]},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "id": {"type": ["integer", "string"], "description": "An id."},
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "string"}, {"type": "integer"}],
                "items": False,
            },
        },
        "required": ["kind"],
    }
    assert gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "email": {
                "type": "STRING",
                "description": 'Where to write. (format: "email")',
                "nullable": True,
            },
            "kind": {"type": "STRING", "enum": ["fixed"]},
            "mode": {"type": "STRING", "nullable": True, "enum": ["fast", "slow"]},
            "level": {"type": "INTEGER", "description": "(enum: [1, 2, 3])"},
            "ratio": {
                "type": "NUMBER",
                "minimum": 0,
                "maximum": 1,
                "description": "(exclusiveMinimum: 0)",
            },
            "id": {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}], "description": "An id."},
            "pair": {
                "type": "ARRAY",
                "maxItems": 2,
                "items": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
                "description": '(prefixItems: [{"type": "string"}, {"type": "integer"}])',
            },
        },
        "required": ["kind"],
    }


def test_anthropic_strict_keeps_its_subset_and_notes_the_rest() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string", "minLength": 2, "format": "email"},
            "n": {"type": "integer", "minimum": 1, "default": 5},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
            "v": {"oneOf": [{"type": "integer"}, {"type": "string", "format": "color"}]},
        },
        "required": ["q"],
    }
    assert anthropic_strict_schema(schema) == {
        "type": "object",
        "properties": {
            "q": {"type": "string", "format": "email", "description": "(minLength: 2)"},
            "n": {"type": "integer", "default": 5, "description": "(minimum: 1)"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "(maxItems: 3)",
            },
            "v": {
                "anyOf": [
                    {"type": "integer"},
                    {"type": "string", "description": '(format: "color")'},
                ]
            },
        },
        "required": ["q"],
        "additionalProperties": False,
    }


def test_gemini_parts_and_sdk_function_calls_parse_in_order() -> None:
    parts = [
        {"text": "two calls"},
        {"functionCall": {"id": "a", "name": "page", "args": {"query": "x"}}},
        {"functionCall": {"id": "b", "name": "page", "args": {"query": "y"}}},
    ]
    calls = parse_gemini_function_calls(parts)
    assert [(c.tool_call_id, c.arguments) for c in calls] == [
        ("a", {"query": "x"}),
        ("b", {"query": "y"}),
    ]
    genai_types = pytest.importorskip("google.genai.types")
    sdk_calls = [genai_types.FunctionCall(name="page", args={"query": "z"})]
    assert parse_gemini_function_calls(sdk_calls)[0].arguments == {"query": "z"}


@pytest.mark.anyio
async def test_parameter_names_gemini_refuses_travel_renamed_and_come_back() -> None:
    schema = {
        "type": "object",
        "properties": {
            "max-results": {"type": "integer"},
            "max_results": {"type": "string"},
            "城市": {"type": "string", "description": "City."},
            "rows": {
                "type": "array",
                "items": {"type": "object", "properties": {"a.b": {"type": "string"}}},
            },
        },
        "required": ["城市"],
    }
    tm = ToolManager()
    tm.register_tool((ToolSpec(name="find", input_schema=schema), _Echo()))
    [declared] = tm.get_gemini_tools()
    properties = declared["parameters"]["properties"]
    assert all(GEMINI_PARAMETER_NAME_PATTERN.match(n) for n in properties)
    assert properties["max_results"] == {"type": "STRING"}  # a valid name keeps its own
    assert properties["p"]["description"] == 'City. (parameter "城市")'
    assert declared["parameters"]["required"] == ["p"]
    renamed = next(n for n in properties if n.startswith("max_results_"))
    part = {
        "functionCall": {
            "name": "find",
            "args": {renamed: 3, "p": "Paris", "rows": [{"a_b": "x"}]},
        }
    }
    call = parse_gemini_function_call(part, tm)
    assert call.arguments == {"max-results": 3, "城市": "Paris", "rows": [{"a.b": "x"}]}
    result = await tm.run_tool(call.name, call.arguments)
    assert result.structured == {"tool": "find", "args": call.arguments}
    assert parse_gemini_function_call(part).arguments == part["functionCall"]["args"]

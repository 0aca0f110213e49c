"""ToolSpec -> MCP Tool and ToolResult -> CallToolResult, without loss."""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as mt
import pytest

from sagents.core._permissions import ToolAnnotations
from sagents.core._result import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from sagents.core._secrets import Redactor
from sagents.core._spec import ToolSpec
from sagents.errors import ToolTimeoutError, UpstreamSchemaError
from sagents.gateway._convert import (
    ERROR_META_KEY,
    check_servable,
    redact_call_tool_result,
    spec_to_mcp_tool,
    to_call_tool_result,
)


def test_spec_becomes_a_tool_with_schemas_annotations_and_meta() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    spec = ToolSpec(
        name="fleet__count",
        description="Count things.",
        input_schema=schema,
        output_schema={"type": "object", "properties": {"count": {"type": "integer"}}},
        annotations=ToolAnnotations(title="Count", read_only_hint=True, open_world_hint=False),
        meta={"origin": "fleet"},
    )
    wire = spec_to_mcp_tool(spec).model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire == {
        "name": "fleet__count",
        "description": "Count things.",
        "inputSchema": schema,
        "outputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}},
        "annotations": {"title": "Count", "readOnlyHint": True, "openWorldHint": False},
        "_meta": {"origin": "fleet"},
    }


def test_hints_that_were_not_given_stay_absent() -> None:
    tool = spec_to_mcp_tool(ToolSpec(name="bare"))
    assert tool.annotations is None
    assert tool.output_schema is None
    assert tool.input_schema == {"type": "object", "properties": {}}


def test_converted_schema_is_a_copy() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    tool = spec_to_mcp_tool(ToolSpec(name="t", input_schema=schema))
    tool.input_schema["properties"]["a"]["type"] = "integer"
    assert schema["properties"]["a"] == {"type": "string"}


def test_every_content_block_kind_and_structured_content_survive() -> None:
    result = ToolResult(
        content=(
            TextContent(text="hello"),
            ImageContent(data="aW1n", mime_type="image/png"),
            AudioContent(data="YXVk", mime_type="audio/wav"),
            ResourceLink(uri="file:///a.txt", name="a", mime_type="text/plain", size=3),
            EmbeddedResource(uri="mem://t", mime_type="text/plain", text="inline"),
            EmbeddedResource(uri="mem://b", mime_type="application/octet-stream", blob="AAE="),
        ),
        structured={"x": [1, 2]},
        meta={"trace": "t1"},
    )
    call = to_call_tool_result(result)
    wire = call.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire["content"] == [
        {"type": "text", "text": "hello"},
        {"type": "image", "data": "aW1n", "mimeType": "image/png"},
        {"type": "audio", "data": "YXVk", "mimeType": "audio/wav"},
        {
            "type": "resource_link",
            "uri": "file:///a.txt",
            "name": "a",
            "mimeType": "text/plain",
            "size": 3,
        },
        {
            "type": "resource",
            "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "inline"},
        },
        {
            "type": "resource",
            "resource": {"uri": "mem://b", "mimeType": "application/octet-stream", "blob": "AAE="},
        },
    ]
    assert wire["structuredContent"] == {"x": [1, 2]}
    assert wire["isError"] is False
    assert wire["_meta"] == {"trace": "t1"}


def test_layer_error_keeps_its_code_in_meta_and_its_text() -> None:
    result = ToolResult.from_exception(ToolTimeoutError("took too long", hint="raise the timeout"))
    call = to_call_tool_result(result)
    assert call.is_error is True
    assert call.meta is not None
    assert call.meta[ERROR_META_KEY] == {
        "code": "timeout",
        "message": "took too long",
        "hint": "raise the timeout",
    }
    assert isinstance(call.content[0], mt.TextContent)
    assert call.content[0].text.startswith("Error [timeout]: took too long")


def test_error_without_content_gets_a_text_block() -> None:
    call = to_call_tool_result(ToolResult(is_error=True))
    assert call.is_error is True
    assert [b.model_dump(exclude_none=True) for b in call.content] == [
        {"type": "text", "text": "the tool reported an error"}
    ]


def test_a_root_without_type_gets_type_object() -> None:
    tool = spec_to_mcp_tool(ToolSpec(name="t", input_schema={"properties": {}}))
    assert tool.input_schema == {"properties": {}, "type": "object"}


def test_a_non_object_root_is_an_upstream_schema_error() -> None:
    with pytest.raises(UpstreamSchemaError, match="root type 'array'"):
        spec_to_mcp_tool(ToolSpec(name="t", input_schema={"type": "array"}))


def test_the_upstreams_server_info_stamp_is_left_out_and_the_rest_of_meta_kept() -> None:
    result = ToolResult(
        content=(TextContent(text="x"),),
        meta={mt.SERVER_INFO_META_KEY: {"name": "upstream", "version": "1"}, "k": {"v": [1]}},
    )
    call = to_call_tool_result(result)
    assert call.meta == {"k": {"v": [1]}}


@pytest.mark.parametrize(
    ("input_schema", "output_schema", "servable"),
    [
        ({"type": "object"}, None, True),
        ({"properties": {}}, {"properties": {}}, True),
        ({"type": "array"}, None, False),
        ({"type": "object"}, {"type": "string"}, False),
    ],
)
def test_check_servable_agrees_with_spec_to_mcp_tool(
    input_schema: dict[str, Any], output_schema: dict[str, Any] | None, servable: bool
) -> None:
    spec = ToolSpec(name="t", input_schema=input_schema, output_schema=output_schema)
    outcomes = []
    for check in (check_servable, spec_to_mcp_tool):
        try:
            check(spec)
            outcomes.append(True)
        except UpstreamSchemaError:
            outcomes.append(False)
    assert outcomes == [servable, servable]


def test_a_tools_call_answer_has_a_secret_redacted_from_an_embedded_blob() -> None:
    secret = "local-tool-secret-value"
    blob = base64.b64encode(f"key={secret}".encode()).decode()
    resource = mt.BlobResourceContents(uri="file:///env", mime_type="text/plain", blob=blob)
    result = mt.CallToolResult(content=[mt.EmbeddedResource(resource=resource)])
    redacted = redact_call_tool_result(result, Redactor({"LOCAL": secret}))
    [block] = redacted.content
    assert isinstance(block, mt.EmbeddedResource)
    assert isinstance(block.resource, mt.BlobResourceContents)
    assert base64.b64decode(block.resource.blob) == b"key=[redacted:LOCAL]"

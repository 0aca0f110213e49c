from typing import Any

import mcp_types as types
import pytest

from sagents.core import EmbeddedResource, ImageContent, ResourceLink, TextContent
from sagents.errors import UpstreamSchemaError
from sagents.mcp import (
    ServerSettings,
    check_input_schema,
    check_server_name,
    convert_result,
    split_tool_name,
    tool_to_spec,
)

LEGACY = "2025-11-25"
MODERN = "2026-07-28"


def _tool(schema: dict[str, Any] | None = None, **kw: Any) -> types.Tool:
    return types.Tool(name="t", input_schema=schema or {"type": "object"}, **kw)


@pytest.mark.parametrize("name", ["fleet", "my-server", "a_b", "x1", "A"])
def test_good_server_names_are_accepted(name: str) -> None:
    check_server_name(name)


@pytest.mark.parametrize("name", ["a__b", "_a", "a_", "", "a.b", "a/b", "a b", "x" * 41])
def test_ambiguous_server_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(ValueError, match="invalid MCP server name"):
        check_server_name(name)


def test_tool_names_split_at_the_first_separator() -> None:
    assert split_tool_name("fleet__get__status") == ("fleet", "get__status")
    with pytest.raises(ValueError, match="not an MCP tool name"):
        split_tool_name("plain")


HARD_BUT_USABLE: list[dict[str, Any]] = [
    {"$ref": "#/$defs/Root", "$defs": {"Root": {"type": "object"}}},
    {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {"head": {"$ref": "#/$defs/Node"}},
    },
    {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": "object", "properties": {"contains": {"type": "array"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
    {"properties": {"n": {"enum": [1, 2, 3]}}},
    {"type": "object", "properties": {"u": {"type": "string", "format": "uri"}}},
    {"type": "object", "properties": {"e": {"enum": [{"$ref": "not a ref"}]}}},
]


@pytest.mark.parametrize("schema", HARD_BUT_USABLE)
def test_hard_but_valid_schemas_are_usable(schema: dict[str, Any]) -> None:
    check_input_schema(schema)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/gone"}}}, "unresolvable \\$ref"),
        ({"type": "object", "properties": {"x": {"$ref": "http://example.com/s"}}}, "unresolvable"),
        ({"type": "string"}, "not 'object'"),
        ({"$ref": "#/$defs/S", "$defs": {"S": {"type": "array"}}}, "not 'object'"),
        ({"type": "object", "properties": {"x": {"type": 12}}}, "not a valid JSON Schema"),
        ([1, 2], "not an object"),
    ],
)
def test_unusable_schemas_are_refused_with_the_reason(schema: Any, reason: str) -> None:
    with pytest.raises(UpstreamSchemaError, match=reason):
        check_input_schema(schema)


def test_spec_keeps_the_full_schema_source_and_output_schema() -> None:
    schema = {
        "type": "object",
        "$defs": {"A": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/A"}},
    }
    tool = types.Tool(
        name="get.status", description="d", input_schema=schema, output_schema={"type": "object"}
    )
    spec = tool_to_spec("fleet", tool, ServerSettings(), protocol_version=MODERN)
    assert spec.name == "fleet__get.status"
    assert spec.input_schema == schema
    assert spec.output_schema == {"type": "object"}
    assert (spec.source.kind, spec.source.server, spec.source.original_name) == (
        "mcp",
        "fleet",
        "get.status",
    )


def test_spec_of_a_bad_schema_names_server_tool_and_reason() -> None:
    tool = _tool({"type": "object", "properties": {"x": {"$ref": "#/nope"}}})
    with pytest.raises(UpstreamSchemaError) as caught:
        tool_to_spec("srv", tool, ServerSettings(), protocol_version=MODERN)
    assert caught.value.details["server"] == "srv"
    assert caught.value.details["tool"] == "t"
    assert "unresolvable" in caught.value.details["reason"]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, "destructive"),
        (types.ToolAnnotations(read_only_hint=True), "read_only"),
        (types.ToolAnnotations(read_only_hint=False, destructive_hint=False), "write"),
        (types.ToolAnnotations(destructive_hint=True), "destructive"),
    ],
)
def test_permission_class_follows_annotations(
    annotations: types.ToolAnnotations | None, expected: str
) -> None:
    spec = tool_to_spec(
        "s", _tool(annotations=annotations), ServerSettings(), protocol_version=MODERN
    )
    assert spec.permission == expected


def test_task_support_required_counts_only_for_legacy_protocols() -> None:
    tool = _tool(execution=types.ToolExecution(task_support="required"))
    assert (
        tool_to_spec("s", tool, ServerSettings(), protocol_version=LEGACY).permission
        == "long_task_only"
    )
    assert (
        tool_to_spec("s", tool, ServerSettings(), protocol_version=MODERN).permission
        == "destructive"
    )


def test_config_overrides_annotations_per_tool_then_per_server() -> None:
    tool = _tool(annotations=types.ToolAnnotations(read_only_hint=True))
    server_wide = ServerSettings(permission="write")
    per_tool = ServerSettings(permission="write", tool_permissions={"t": "disabled"})
    assert tool_to_spec("s", tool, server_wide, protocol_version=MODERN).permission == "write"
    assert tool_to_spec("s", tool, per_tool, protocol_version=MODERN).permission == "disabled"


def test_results_convert_every_block_kind_without_loss() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="t"),
            types.ImageContent(data="aW1n", mime_type="image/png"),
            types.ResourceLink(uri="file:///x", name="x", size=3),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///b", blob="Yg==")
            ),
        ],
        structured_content={"a": 1},
        _meta={"trace": "1"},
    )
    converted = convert_result(result)
    assert converted.content[0] == TextContent(text="t")
    assert converted.content[1] == ImageContent(data="aW1n", mime_type="image/png")
    assert converted.content[2] == ResourceLink(uri="file:///x", name="x", size=3)
    assert converted.content[3] == EmbeddedResource(uri="file:///b", blob="Yg==")
    assert converted.structured == {"a": 1}
    assert converted.meta == {"trace": "1"}


def test_is_error_with_empty_content_stays_an_empty_error() -> None:
    converted = convert_result(types.CallToolResult(content=[], is_error=True))
    assert converted.is_error
    assert converted.content == ()
    assert converted.error is None

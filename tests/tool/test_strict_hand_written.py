"""Strict export of hand-written (MCP-style) schemas: OpenAI's rules hold on every node, merges
keep the meaning, reference ladders stay linear, and what cannot be expressed is refused."""

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SchemaExportError, ToolDefinitionError, UpstreamSchemaError
from sagents.mcp._convert import check_input_schema
from sagents.tool import ToolManager
from sagents.tool._export_strict import MAX_STRICT_NODES, STRICT_KEYWORDS
from sagents.tool._handler import ToolCall
from sagents.tool._json_schema import iter_subschemas
from sagents.tool._schema_merge import MergeConflict, merge_conjunction
from sagents.tool.openai_export import (
    faithful_schema,
    strict_absent_to_nulls,
    strict_nulls_to_absent,
    strict_schema,
)
from tests.tool.test_export_corpus import HARD_CASES, UNEXPRESSIBLE_IN_STRICT

Schema = dict[str, Any]


def _nodes(node: Any, path: str = "") -> list[tuple[str, Schema]]:
    if not isinstance(node, dict):
        return []
    found = [(path, node)]
    for _, child_path, child in iter_subschemas(node, path):
        found.extend(_nodes(child, child_path))
    return found


def _assert_openai_strict_rules(schema: Schema) -> None:
    for path, node in _nodes(schema):
        assert set(node) <= STRICT_KEYWORDS, (path, node)
        if "$ref" in node:
            assert list(node) == ["$ref"], (path, node)  # nothing may stand beside a $ref
        if "properties" in node:
            types = node.get("type")
            assert types == "object" or (isinstance(types, list) and "object" in types), node
            assert node["additionalProperties"] is False, (path, node)
            assert set(node["required"]) == set(node["properties"]), (path, node)


@pytest.mark.parametrize(
    "schema",
    [c[1] for c in HARD_CASES if c[0] not in UNEXPRESSIBLE_IN_STRICT],
    ids=[c[0] for c in HARD_CASES if c[0] not in UNEXPRESSIBLE_IN_STRICT],
)
def test_every_strict_node_follows_openai_rules(schema: Schema) -> None:
    _assert_openai_strict_rules(dict(strict_schema(schema).schema))


def test_object_nodes_without_type_get_type_object_everywhere() -> None:
    keyed = {"properties": {"k": {"type": "string"}}, "required": ["k"]}
    schema: Schema = {
        "type": "object",
        "properties": {
            "o": keyed,
            "xs": {"type": "array", "items": keyed},
            "u": {"anyOf": [keyed, {"type": "integer"}]},
        },
        "required": ["o", "xs", "u"],
    }
    strict = strict_schema(schema)
    _assert_openai_strict_rules(dict(strict.schema))
    properties = strict.schema["properties"]
    assert properties["o"]["type"] == "object"
    assert properties["xs"]["items"]["type"] == "object"
    assert properties["u"]["anyOf"][0]["type"] == "object"
    # Objects are decided like the original; a non-object where an untyped object node stands
    # is the documented narrowing (docs/tool-schema.md): the original accepts it, strict does not.
    good: dict[str, Any] = {"o": {"k": "a"}, "xs": [{"k": "b"}], "u": 3}
    assert strict.validator.is_valid(good)
    assert Draft202012Validator(schema).is_valid({**good, "o": 5})
    assert not strict.validator.is_valid({**good, "o": 5})


def test_a_ref_beside_properties_never_keeps_the_ref_next_to_a_closed_object() -> None:
    # The defect: {"$ref", "properties": {}, "additionalProperties": false} accepts nothing.
    schema: Schema = {
        "type": "object",
        "properties": {"p": {"allOf": [{"$ref": "#/$defs/B"}], "type": "object"}},
        "required": ["p"],
        "$defs": {"B": {"type": "object", "properties": {"id": {"type": "string"}}}},
    }
    strict = strict_schema(schema)
    p = strict.schema["properties"]["p"]
    assert "$ref" not in p
    assert strict.validator.is_valid({"p": {"id": "x"}})


def test_a_nested_id_resolves_refs_against_its_own_resource() -> None:
    schema: Schema = {
        "type": "object",
        "properties": {
            "x": {
                "$id": "https://example.com/in",
                "$defs": {"T": {"type": "integer"}},
                "$ref": "#/$defs/T",
            }
        },
        "required": ["x"],
        "$defs": {"T": {"type": "string"}},
    }
    assert Draft202012Validator(schema).is_valid({"x": 1})
    assert not Draft202012Validator(schema).is_valid({"x": "a"})
    for exported in (faithful_schema(schema), dict(strict_schema(schema).schema)):
        validator = Draft202012Validator(exported)
        assert validator.is_valid({"x": 1}), exported
        assert not validator.is_valid({"x": "a"}), exported


# -- described $ref ladders (pydantic's Field(description=) on nested models) -------------------


def _ladder(rungs: int) -> Schema:
    defs: Schema = {f"L{rungs}": {"type": "object", "properties": {"v": {"type": "integer"}}}}
    for i in range(rungs - 1, -1, -1):
        down = f"#/$defs/L{i + 1}"
        defs[f"L{i}"] = {
            "type": "object",
            "properties": {
                "a": {"$ref": down, "description": "left"},
                "b": {"$ref": down, "description": "right"},
            },
            "required": ["a", "b"],
        }
    return {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/L0", "description": "top"}},
        "required": ["root"],
        "$defs": defs,
    }


def test_a_described_ref_ladder_exports_in_size_linear_in_its_input() -> None:
    sizes = {}
    for rungs in (14, 16, 64, 256):
        schema = _ladder(rungs)
        strict = strict_schema(schema)
        _assert_openai_strict_rules(dict(strict.schema))
        sizes[rungs] = len(json.dumps(strict.schema))
        # Was 8.9 MB at 14 rungs and 35 MB at 16: each rung doubled the copy.
        assert sizes[rungs] < 10 * len(json.dumps(schema)), (rungs, sizes[rungs])
    assert sizes[16] < 1.5 * sizes[14]
    assert sizes[256] < 2 * (256 / 16) * sizes[16]  # linear, with room for the inlined tail


def test_a_described_ref_ladder_still_decides_like_the_original() -> None:
    schema = _ladder(6)
    strict, original = strict_schema(schema), Draft202012Validator(schema)
    leaf: Any = {"v": 1}
    for _ in range(6):
        leaf = {"a": leaf, "b": leaf}
    for sample in ({"root": leaf}, {"root": {**leaf, "a": {"v": "x"}}}, {"root": {"a": leaf}}):
        assert strict.validator.is_valid(sample) == original.is_valid(sample), sample


def test_past_the_node_budget_the_strict_export_is_refused_and_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A definition too large to copy, referred to (described) from more sites than the budget.
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(80)}}
    sites = {f"s{i}": {"$ref": "#/$defs/Big", "description": "d"} for i in range(20)}
    assert strict_schema({"type": "object", "properties": sites, "$defs": {"Big": big}})
    fan: Schema = {f"Big{i}": big for i in range(MAX_STRICT_NODES // 80 + 1)}
    hostile: Schema = {"type": "object", "properties": {}, "$defs": fan}
    with pytest.raises(SchemaExportError, match="more than") as caught:
        strict_schema(hostile)
    assert caught.value.hint == "export this tool with strict=False"

    async def handler(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_text("ok")

    manager = ToolManager()
    manager.register_tool((ToolSpec(name="hostile", input_schema=hostile), handler))
    with caplog.at_level(logging.WARNING):
        (tool,) = manager.get_openai_tools(strict=True)
    assert "strict" not in tool["function"]
    assert "'hostile' cannot be exported in strict mode" in caplog.text


# -- nesting limits ----------------------------------------------------------------------------


def _deep(levels: int) -> Schema:
    node: Schema = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


@pytest.mark.parametrize("levels", [300, 5000])
def test_a_deeply_nested_schema_is_a_definition_error_not_a_recursion_error(levels: int) -> None:
    async def handler(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_text("ok")

    with pytest.raises(ToolDefinitionError, match="levels deep") as caught:
        ToolManager().register_tool((ToolSpec(name="deep", input_schema=_deep(levels)), handler))
    assert caught.value.hint
    with pytest.raises(UpstreamSchemaError, match="levels deep"):
        check_input_schema(_deep(levels))  # an MCP tool with it is withheld, with a warning


def test_a_schema_just_under_the_nesting_limit_still_registers_and_exports() -> None:
    async def handler(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_text("ok")

    manager = ToolManager()
    manager.register_tool((ToolSpec(name="deepish", input_schema=_deep(60)), handler))
    (tool,) = manager.get_openai_tools(strict=True)
    assert tool["function"]["strict"] is True


# -- merging is sound: the merged schema decides like allOf of its members ---------------------

TYPES = ["string", "integer", "number", "boolean", "null"]
VALUES: list[Any] = [None, True, False, 0, 1, 2, 3, 5, 7, 2.5, -1, "", "a", "ab", "abc", "zz"]


@st.composite
def member(draw: st.DrawFn) -> Schema:
    schema: Schema = {}
    if draw(st.booleans()):
        types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True))
        schema["type"] = types[0] if len(types) == 1 else types
    for key in ("minimum", "maximum", "minLength", "maxLength"):
        if draw(st.booleans()):
            schema[key] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        schema["enum"] = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=5))
    if draw(st.booleans()):
        schema["pattern"] = draw(st.sampled_from(["^a", "b$", "^a"]))
    return schema


@given(member(), member())
def test_a_merged_conjunction_accepts_exactly_what_both_members_accept(
    first: Schema, second: Schema
) -> None:
    try:
        merged = merge_conjunction(first, second, lambda ref: {})
    except MergeConflict:
        return  # refused: the export then falls back to faithful, which keeps allOf
    both = Draft202012Validator({"allOf": [first, second]})
    one = Draft202012Validator(merged)
    for value in VALUES:
        assert one.is_valid(value) == both.is_valid(value), (value, merged)


@st.composite
def object_member(draw: st.DrawFn) -> Schema:
    names = draw(st.lists(st.sampled_from(["a", "b"]), max_size=2, unique=True))
    schema: Schema = {"type": "object", "properties": {n: draw(member()) for n in names}}
    if draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from(["a", "b", "c"]), max_size=2))
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


OBJECTS = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(VALUES), max_size=3)


@given(object_member(), object_member(), st.lists(OBJECTS, min_size=5, max_size=10))
def test_merged_objects_accept_exactly_what_both_members_accept(
    first: Schema, second: Schema, samples: list[dict[str, Any]]
) -> None:
    try:
        merged = merge_conjunction(first, second, lambda ref: {})
    except MergeConflict:
        return
    both = Draft202012Validator({"allOf": [first, second]})
    one = Draft202012Validator(merged)
    for value in samples:
        assert one.is_valid(value) == both.is_valid(value), (value, merged)


@st.composite
def conjunction_tool(draw: st.DrawFn) -> Schema:
    """A tool schema whose property ``p`` is an ``allOf`` or a ``$ref`` with siblings."""
    first, second = draw(member()), draw(member())
    for node in (first, second):  # strict mode needs a type somewhere in the conjunction
        node.setdefault("type", draw(st.sampled_from(["string", "integer"])))
    if draw(st.booleans()):
        p: Schema = {"allOf": [first, second]}
        defs: Schema = {}
    else:
        p, defs = {"$ref": "#/$defs/D", **second}, {"D": first}
    schema: Schema = {"type": "object", "properties": {"p": p}, "required": ["p"]}
    if defs:
        schema["$defs"] = defs
    return schema


@given(conjunction_tool())
def test_the_strict_path_decides_conjunctions_like_the_original(schema: Schema) -> None:
    try:
        strict = strict_schema(schema)
    except SchemaExportError:
        return  # get_openai_tools then exports this tool faithfully, with a warning
    _assert_openai_strict_rules(dict(strict.schema))
    original = Draft202012Validator(schema)
    for value in VALUES:
        sample = {"p": value}
        accepted = original.is_valid(sample)
        # Never narrower than the original; where strict dropped keywords (lengths) it may be
        # looser, and run_tool validates against the original after the call comes back.
        if accepted:
            assert strict.validator.is_valid(sample), (sample, strict.schema)
        elif not _drops_keywords(schema):
            assert not strict.validator.is_valid(sample), (sample, strict.schema)


def _drops_keywords(schema: Schema) -> bool:
    text = json.dumps(schema)
    return any(f'"{key}"' in text for key in ("minLength", "maxLength"))


# -- keywords beside a union: distributed into each branch, never closing a branch off --------

SCALARS = ["string", "integer", "boolean"]
NAMES = ["a", "b", "c"]


@st.composite
def object_branch(draw: st.DrawFn) -> Schema:
    names = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
    branch: Schema = {"properties": {n: {"type": draw(st.sampled_from(SCALARS))} for n in names}}
    required = draw(st.booleans())
    if names and required:
        branch["required"] = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    if draw(st.booleans()):
        branch["type"] = "object"
    return branch


@st.composite
def union_beside_properties(draw: st.DrawFn) -> tuple[Schema, Schema]:
    """A tool whose property ``p`` has ``properties`` beside an anyOf/oneOf of object shapes
    (as a ``$ref`` or inline), and the same schema with each branch closed over its names."""
    siblings = draw(object_branch())
    siblings["type"] = "object"
    branches = draw(st.lists(object_branch(), min_size=1, max_size=3))
    key = draw(st.sampled_from(["anyOf", "oneOf"]))
    defs = {f"B{i}": b for i, b in enumerate(branches)}
    by_ref = draw(st.booleans())
    members = [{"$ref": f"#/$defs/B{i}"} for i in range(len(branches))] if by_ref else branches
    p = {**siblings, key: members}
    schema: Schema = {"type": "object", "properties": {"p": p}, "required": ["p"]}
    if by_ref:
        schema["$defs"] = defs
    names = [sorted({*siblings["properties"], *b["properties"]}) for b in branches]
    closed: Schema = {
        "type": "object",
        "properties": {
            "p": {
                "anyOf": [
                    {"allOf": [siblings, b], "propertyNames": {"enum": n or [""]}}
                    for b, n in zip(branches, names, strict=True)
                ]
            }
        },
        "required": ["p"],
    }
    return schema, closed


# No null values: in strict mode a null sent for an optional property means "absent".
INNER = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["x", 1, True, 2.5]), max_size=3)


@given(union_beside_properties(), st.lists(INNER, min_size=8, max_size=16))
def test_keywords_beside_a_union_are_distributed_into_its_branches(
    schemas: tuple[Schema, Schema], samples: list[dict[str, Any]]
) -> None:
    schema, closed = schemas
    try:
        strict = strict_schema(schema)
    except SchemaExportError:
        return  # get_openai_tools then exports this tool faithfully, with a warning
    _assert_openai_strict_rules(dict(strict.schema))
    original, closed_original = Draft202012Validator(schema), Draft202012Validator(closed)
    for inner in samples:
        sample = {"p": inner}
        strict_form = strict_absent_to_nulls(strict, sample)
        if closed_original.is_valid(sample) and original.is_valid(sample):
            assert strict.validator.is_valid(strict_form), (sample, strict_form, strict.schema)
        if strict.validator.is_valid(strict_form):
            assert original.is_valid(strict_nulls_to_absent(strict, strict_form)) == (
                original.is_valid(sample)
            ), (sample, strict.schema)

"""Corpus and property tests: the Anthropic and Gemini exports accept what the original accepts.

For every schema of the export corpus (the hand-written hard cases, more cases for inlining,
and the five reference MCP servers' tools) and its edge samples (``_mutations``):

* the Anthropic strict schema accepts every sample the original accepts (unknown properties
  aside: strict objects are closed), and the path "strict schema, then the original" decides
  like the original;
* the Gemini declaration, read back as JSON Schema (``TYPE`` -> ``type``, ``nullable`` ->
  ``null``), accepts every sample the original accepts, in its strict form for
  ``strict=True``;
* a schema either export cannot express raises ``SchemaExportError``; no other outcome.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SchemaExportError, ToolNameConflictError
from sagents.tool import ToolManager
from sagents.tool._export_strict import strict_absent_to_nulls, strict_schema
from sagents.tool._handler import ToolCall
from sagents.tool._json_schema import iter_subschemas, map_subschemas
from sagents.tool.export_anthropic import anthropic_strict_schema
from sagents.tool.export_gemini import (
    GEMINI_NAME_PATTERN,
    declare_gemini_arguments,
    gemini_schema,
    parse_gemini_function_call,
    restore_gemini_arguments,
)
from sagents.tool.export_inline import distribute_unions, inline_schema
from sagents.tool.openai_export import faithful_schema
from tests.tool.test_export_corpus import (
    HARD_CASES,
    _has_unknown_keys,
    _mutations,
    _validator,
    real_schemas,
)
from tests.tool.test_strict_properties import leaf

__all__ = ["real_schemas"]  # the module-scoped fixture of the reference servers' schemas

Schema = dict[str, Any]

INLINE_CASES: list[tuple[str, Schema, list[Any], list[Any]]] = [
    (
        "all_of_ref",
        {
            "type": "object",
            "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}], "description": "a point"}},
            "required": ["p"],
            "$defs": {
                "P": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                    "required": ["x"],
                }
            },
        },
        [{"p": {"x": 1}}, {"p": {"x": 1, "y": 2}}],
        [{"p": {"y": 2}}, {"p": {"x": "1"}}, {}],
    ),
    (
        "ref_with_siblings",
        {
            "type": "object",
            "properties": {
                "code": {"$ref": "#/$defs/Code", "pattern": "^[A-Z]+$", "description": "a code"}
            },
            "required": ["code"],
            "$defs": {"Code": {"type": "string", "minLength": 2}},
        },
        [{"code": "AB"}],
        [{"code": "A"}, {"code": "ab"}, {"code": 1}, {}],
    ),
    (
        "ref_with_sibling_properties",
        {
            "type": "object",
            "properties": {
                "o": {
                    "$ref": "#/$defs/Base",
                    "properties": {"extra": {"type": "boolean"}},
                }
            },
            "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}}},
        },
        [{}, {"o": {"id": "a"}}, {"o": {"id": "a", "extra": True}}],
        [{"o": {"id": 1}}, {"o": {"extra": "yes"}}],
    ),
    (
        "shared_definition",
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/T"}, "b": {"$ref": "#/$defs/T"}},
            "required": ["a"],
            "$defs": {"T": {"type": "string", "enum": ["x", "y"]}},
        },
        [{"a": "x"}, {"a": "x", "b": "y"}],
        [{"a": "z"}, {"b": "x"}],
    ),
    (
        "nullable_enum_and_const",
        {
            "type": "object",
            "properties": {
                "mode": {"enum": ["fast", "slow", None]},
                "kind": {"const": "fixed"},
                "level": {"enum": [1, 2, 3]},
            },
            "required": ["mode"],
        },
        [{"mode": None}, {"mode": "fast", "kind": "fixed", "level": 2}],
        [{"mode": "medium"}, {"mode": None, "kind": "other"}, {"mode": None, "level": 4}, {}],
    ),
    (
        "exclusive_bounds_and_union_types",
        {
            "type": "object",
            "properties": {
                "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "id": {"type": ["integer", "string", "null"]},
            },
            "required": ["ratio"],
        },
        [{"ratio": 0.5}, {"ratio": 1, "id": 3}, {"ratio": 1, "id": "a"}, {"ratio": 1, "id": None}],
        [{"ratio": 0}, {"ratio": 2}, {"ratio": 0.5, "id": 1.5}, {}],
    ),
    (
        "tuple",
        {
            "type": "object",
            "properties": {
                "pair": {
                    "type": "array",
                    "prefixItems": [{"type": "string"}, {"type": "integer"}],
                    "items": False,
                }
            },
            "required": ["pair"],
        },
        [{"pair": ["a", 1]}, {"pair": ["a"]}],
        [{"pair": [1, "a"]}, {"pair": ["a", 1, 2]}, {}],
    ),
    (
        "nested_open_map",
        {
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "required": ["labels"],
        },
        [{"labels": {}}, {"labels": {"a": "x"}}],
        [{"labels": {"a": 1}}, {}],
    ),
    (
        "root_open_map",
        {"type": "object", "additionalProperties": {"type": "integer"}},
        [{}, {"a": 1}],
        [{"a": "x"}],
    ),
    (
        "properties_and_extra_schema",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "additionalProperties": {"type": "integer"},
        },
        [{}, {"name": "a"}, {"name": "a", "n": 1}],
        [{"name": 1}, {"n": "x"}],
    ),
    (
        "object_with_any_of_shapes",
        {
            "type": "object",
            "properties": {
                "target": {
                    "type": "object",
                    "properties": {"kind": {"type": "string"}},
                    "required": ["kind"],
                    "anyOf": [
                        {"properties": {"path": {"type": "string"}}, "required": ["path"]},
                        {"properties": {"url": {"type": "string"}}, "required": ["url"]},
                    ],
                }
            },
            "required": ["target"],
        },
        [{"target": {"kind": "f", "path": "/a"}}, {"target": {"kind": "u", "url": "x"}}],
        [{"target": {"kind": "f"}}, {"target": {"path": "/a"}}, {}],
    ),
    (
        "typed_any_of_with_null_branch",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "anyOf": [{"minLength": 2}, {"type": "null"}]},
                "n": {"type": "number", "oneOf": [{"type": "integer"}, {"multipleOf": 0.5}]},
            },
            "required": ["name"],
        },
        [{"name": "ab"}, {"name": "ab", "n": 2}, {"name": "ab", "n": 0.5}],
        [{"name": "a"}, {"name": None}, {"name": "ab", "n": 1.25}, {}],
    ),
    (
        "root_any_of",
        {
            "type": "object",
            "anyOf": [
                {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ],
        },
        [{"a": "x"}, {"b": 1}],
        [{}, {"a": 1}],
    ),
    (
        "typeless_nested_object",
        {
            "type": "object",
            "properties": {
                "point": {"properties": {"x": {"type": "number"}}, "required": ["x"]},
                "points": {"type": "array", "items": {"properties": {"y": {"type": "number"}}}},
            },
            "required": ["point"],
        },
        [{"point": {"x": 1}}, {"point": {"x": 1}, "points": [{"y": 2}, {}]}],
        [{"point": {}}, {"point": {"x": "1"}}, {"point": {"x": 1}, "points": [{"y": "a"}]}],
    ),
]

CASES = HARD_CASES + INLINE_CASES
INLINE_REFUSES = {
    "recursive_ref",
    "all_of_two_patterns",
    "all_of_closed_member_meets_another_property",
}
OPEN_MAPS = {"nested_open_map", "root_open_map", "root_any_of"}
GEMINI_REFUSES = INLINE_REFUSES | OPEN_MAPS | {"array_without_items", "tuple_with_open_tail"}
ANTHROPIC_REFUSES = (
    INLINE_REFUSES
    | OPEN_MAPS
    | {
        "array_without_items",
        "tuple_with_open_tail",
        "properties_and_extra_schema",
        "additional_properties_true_beside_properties",
        "additional_properties_schema_beside_properties",
    }
)


# -- Gemini's Schema read back as JSON Schema ------------------------------------------------

GEMINI_FIELDS = {
    "type",
    "nullable",
    "description",
    "enum",
    "format",
    "properties",
    "required",
    "items",
    "anyOf",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minProperties",
    "maxProperties",
    "default",
}


def gemini_to_json_schema(node: Schema) -> Schema:
    """Gemini's ``Schema`` as the JSON Schema it stands for (``nullable`` adds ``null``)."""
    unknown = set(node) - GEMINI_FIELDS
    assert not unknown, unknown
    out: Schema = {}
    nullable = node.get("nullable") is True
    for key, value in node.items():
        if key == "type":
            out["type"] = [value.lower(), "null"] if nullable else value.lower()
        elif key == "enum":
            out["enum"] = [*value, None] if nullable else value
        elif key == "properties":
            out["properties"] = {k: gemini_to_json_schema(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = gemini_to_json_schema(value)
        elif key == "anyOf":
            out["anyOf"] = [gemini_to_json_schema(b) for b in value]
        elif key not in ("nullable", "description", "format", "default"):
            out[key] = value
    return out


def _gemini_validator(schema: Schema, *, strict: bool) -> Any:
    parameters = gemini_schema(schema, strict=strict)
    if parameters is None:
        return Draft202012Validator({"type": "object"})
    assert parameters["type"] == "OBJECT"
    assert_no_refs(parameters)
    return Draft202012Validator(gemini_to_json_schema(parameters))


def assert_no_refs(schema: Any, path: str = "") -> None:
    """No schema node holds ``$ref``, ``$defs`` or ``allOf`` (a property may be named so)."""
    if isinstance(schema, dict):
        assert not {"$ref", "$defs", "definitions", "allOf"} & set(schema), path
        for _, child_path, child in iter_subschemas(schema, path):
            assert_no_refs(child, child_path)


def as_read(schema: Any) -> Any:
    """The schema as the exports read it: object (array) keywords without a ``type`` mean an
    object (an array), as in strict mode; a documented difference from JSON Schema."""
    if not isinstance(schema, dict):
        return schema
    out: Schema = map_subschemas(schema, as_read)
    if "type" not in out and not {"$ref", "anyOf", "oneOf", "allOf"} & set(out):
        if {"properties", "required", "additionalProperties"} & set(out):
            out["type"] = "object"
        elif {"items", "prefixItems"} & set(out):
            out["type"] = "array"
    return out


def check_gemini(schema: Schema, samples: list[Any]) -> None:
    original = _validator(as_read(schema))
    inlined = inline_schema(faithful_schema(schema), target="a test")
    for strict in (False, True):
        try:
            exported = _gemini_validator(schema, strict=strict)
        except SchemaExportError:
            assert strict  # get_gemini_tools falls back to the faithful declaration
            continue
        distributed = distribute_unions(inlined, target="a test")
        form = strict_schema(distributed) if strict else None
        for sample in samples:
            if not original.is_valid(sample):
                continue
            sent = strict_absent_to_nulls(form, sample) if form is not None else sample
            if strict and _has_unknown_keys(inlined, sample):
                continue  # strict mode closes objects: the strict form has no unknown keys
            if isinstance(sent, dict):  # parameters Gemini refuses travel under other names
                declared = declare_gemini_arguments(schema, sent)
                assert restore_gemini_arguments(schema, declared) == sent
                sent = declared
            assert exported.is_valid(sent), (strict, sample, sent)


def check_anthropic(schema: Schema, samples: list[Any]) -> None:
    original = _validator(as_read(schema))
    exported = Draft202012Validator(anthropic_strict_schema(schema))
    Draft202012Validator.check_schema(exported.schema)
    assert_no_refs(exported.schema)
    inlined = inline_schema(faithful_schema(schema), target="a test")
    for sample in samples:
        accepted = original.is_valid(sample)
        if _has_unknown_keys(inlined, sample):
            assert not exported.is_valid(sample), sample  # closed objects, as documented
            continue
        if accepted:
            assert exported.is_valid(sample), (sample, exported.schema)
        assert (exported.is_valid(sample) and accepted) == accepted


# -- the corpus ------------------------------------------------------------------------------

IDS = [c[0] for c in CASES]


@pytest.mark.parametrize(("name", "schema", "accepted", "rejected"), CASES, ids=IDS)
def test_inlining_decides_every_case_like_the_original(
    name: str, schema: Schema, accepted: list[Any], rejected: list[Any]
) -> None:
    try:
        inlined = inline_schema(faithful_schema(schema), target="a test")
    except SchemaExportError:
        assert name in INLINE_REFUSES
        return
    assert_no_refs(inlined)
    distributed = distribute_unions(inlined, target="a test")
    original = _validator(schema)
    for exported in (_validator(inlined), _validator(distributed)):
        for sample in accepted + rejected + _mutations(schema):
            assert exported.is_valid(sample) == original.is_valid(sample), sample


@pytest.mark.parametrize(("name", "schema", "accepted", "rejected"), CASES, ids=IDS)
def test_gemini_accepts_what_the_original_accepts(
    name: str, schema: Schema, accepted: list[Any], rejected: list[Any]
) -> None:
    if name in GEMINI_REFUSES:
        for strict in (False, True):
            with pytest.raises(SchemaExportError):
                gemini_schema(schema, strict=strict)
        return
    check_gemini(schema, accepted + rejected + _mutations(schema))


@pytest.mark.parametrize(("name", "schema", "accepted", "rejected"), CASES, ids=IDS)
def test_anthropic_strict_accepts_what_the_original_accepts(
    name: str, schema: Schema, accepted: list[Any], rejected: list[Any]
) -> None:
    if name in ANTHROPIC_REFUSES:
        with pytest.raises(SchemaExportError):
            anthropic_strict_schema(schema)
        return
    check_anthropic(schema, accepted + rejected + _mutations(schema))


def test_the_reference_servers_schemas_export_for_gemini_and_anthropic_or_say_why(
    real_schemas: dict[str, Schema],
) -> None:
    refused: dict[str, dict[str, str]] = {"gemini": {}, "anthropic": {}}
    for name, schema in real_schemas.items():
        samples = _mutations(schema)
        try:
            check_gemini(schema, samples)
        except SchemaExportError as error:
            refused["gemini"][name] = error.message
        try:
            check_anthropic(schema, samples)
        except SchemaExportError as error:
            refused["anthropic"][name] = error.message
    assert refused == {"gemini": {}, "anthropic": {}}  # all 50 tools of the pinned servers


@pytest.mark.parametrize(("name", "schema", "accepted", "rejected"), CASES, ids=IDS)
def test_where_the_anthropic_sdk_strict_transform_loses_inputs_ours_keeps_them(
    name: str, schema: Schema, accepted: list[Any], rejected: list[Any]
) -> None:
    """The ``anthropic`` SDK's own ``transform_schema`` (what its ``parse`` helpers send) as a
    peer: on the corpus it raises on some cases (several ``allOf`` members, no root type,
    draft-07 ``definitions``, type lists, tuples) and closes objects with sibling properties
    beside a ``$ref``; our export never rejects an input the original accepts."""
    transform = pytest.importorskip("anthropic.lib._parse._transform").transform_schema
    samples = accepted + rejected + _mutations(schema)
    original = _validator(as_read(schema))
    try:
        peer = Draft202012Validator(transform(copy.deepcopy(schema)))
        peer_lost = [s for s in samples if original.is_valid(s) and not peer.is_valid(s)]
    except Exception:  # noqa: BLE001 - the peer's failure is what this test records
        peer_lost = []
    try:
        ours = Draft202012Validator(anthropic_strict_schema(schema))
    except SchemaExportError:
        return  # exported faithfully instead: nothing lost
    inlined = inline_schema(faithful_schema(schema), target="a test")
    for sample in peer_lost:
        if not _has_unknown_keys(inlined, sample):
            assert ours.is_valid(sample), sample


# -- properties ------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "title", "type", "default", "x_y", "x-y", "a/b", "名前", "9"])
Pair = tuple[Schema, Any]


def node(depth: int) -> st.SearchStrategy[Pair]:
    if depth == 0:
        return leaf()
    return st.one_of(leaf(), obj(depth - 1), array(depth - 1), described_ref(depth - 1))


@st.composite
def array(draw: st.DrawFn, depth: int) -> Pair:
    items, value = draw(node(depth))
    return {"type": "array", "items": items}, draw(st.sampled_from([[], [value], [value] * 2]))


@st.composite
def described_ref(draw: st.DrawFn, depth: int) -> Pair:
    """A ``$ref`` with a description beside it (pydantic's ``Field(description=)``)."""
    target, value = draw(node(depth))
    return {"$ref": "#/$defs/T", "description": "see T", "__def__": target}, value


@st.composite
def obj(draw: st.DrawFn, depth: int) -> Pair:
    names = draw(st.lists(NAMES, unique=True, min_size=1, max_size=4))
    properties: Schema = {}
    instance: dict[str, Any] = {}
    required: list[str] = []
    for name in names:
        schema, value = draw(node(depth))
        properties[name] = schema
        if draw(st.booleans()):
            required.append(name)
            instance[name] = value
        elif draw(st.booleans()):
            instance[name] = value
    return {"type": "object", "properties": properties, "required": required}, instance


def _hoist_defs(schema: Schema) -> Schema:
    """Give each ``described_ref`` its own definition under the root's ``$defs``."""
    defs: Schema = {}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if "__def__" in value:
                name = f"T{len(defs)}"
                defs[name] = None  # reserve the name before the target's own refs
                defs[name] = walk(value["__def__"])
                return {"$ref": f"#/$defs/{name}", "description": value["description"]}
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    hoisted = walk(schema)
    if defs:
        hoisted["$defs"] = defs
    return dict(hoisted)


@given(obj(2))
def test_every_valid_input_stays_valid_for_gemini_and_anthropic(pair: Pair) -> None:
    schema, instance = _hoist_defs(pair[0]), pair[1]
    assert Draft202012Validator(schema).is_valid(instance)
    check_gemini(schema, [instance])
    check_anthropic(schema, [instance])


# -- hostile schemas: an export or a SchemaExportError, nothing else ------------------------

_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2), st.text(max_size=3)
)
_LEAVES = st.one_of(
    st.booleans(),
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(_TYPES, st.lists(_TYPES, min_size=1, max_size=3, unique=True)),
            "enum": st.lists(_SCALARS, min_size=1, max_size=3),
            "const": _SCALARS,
            "format": st.sampled_from(["email", "date-time", "int32", "uri"]),
            "exclusiveMaximum": st.integers(-2, 2),
            "minItems": st.integers(0, 3),
            "default": _SCALARS,
        },
    ),
)


def _hostile() -> st.SearchStrategy[Any]:
    return st.recursive(
        _LEAVES,
        lambda inner: st.fixed_dictionaries(
            {},
            optional={
                "type": st.one_of(_TYPES, st.lists(_TYPES, min_size=1, max_size=3, unique=True)),
                "properties": st.dictionaries(
                    st.sampled_from(["a", "b", "c-d"]), inner, max_size=3
                ),
                "required": st.lists(st.sampled_from(["a", "b", "z"]), unique=True, max_size=3),
                "additionalProperties": inner,
                "items": inner,
                "prefixItems": st.lists(inner, min_size=1, max_size=2),
                "anyOf": st.lists(inner, min_size=1, max_size=3),
                "oneOf": st.lists(inner, min_size=1, max_size=2),
                "allOf": st.lists(inner, min_size=1, max_size=2),
                "not": inner,
                "$ref": st.just("#/$defs/D"),
            },
        ),
        max_leaves=12,
    )


@given(_hostile(), _hostile())
def test_any_valid_schema_exports_or_is_refused_with_a_schema_export_error(
    root: Any, definition: Any
) -> None:
    schema = {**(root if isinstance(root, dict) else {}), "$defs": {"D": definition}}
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return  # registration refuses it before any export
    for export in (
        gemini_schema,
        lambda s: gemini_schema(s, strict=True),
        anthropic_strict_schema,
    ):
        refusal: SchemaExportError | None = None
        try:
            export(schema)
        except SchemaExportError as error:
            refusal = error
        assert refusal is None or (refusal.message and "path" in refusal.details)


@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=6, unique=True))
def test_every_gemini_name_leads_back_to_its_tool(names: list[str]) -> None:
    tm = ToolManager()
    for name in names:
        with contextlib.suppress(ToolNameConflictError):  # two names one OpenAI export
            tm.register_tool((ToolSpec(name=name, input_schema={"type": "object"}), _Noop()))
    declared = [t["name"] for t in tm.get_gemini_tools()]
    assert len(set(declared)) == len(declared)
    registered = set()
    for name in declared:
        assert GEMINI_NAME_PATTERN.match(name)
        call = parse_gemini_function_call({"name": name, "args": {}}, tm)
        assert tm.has_tool(call.name)
        registered.add(call.name)
    assert len(registered) == len(declared)


class _Noop:
    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_text("ok")


def _unions_beside_properties(depth: int) -> dict[str, Any]:
    """An object whose properties sit beside a two-branch ``anyOf``, nested ``depth`` times:
    distributing the properties into the branches doubles the schema at each level."""
    node: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        node = {
            "type": "object",
            "properties": {"a": {"type": "string"}, "child": node},
            "anyOf": [
                {"properties": {"p": {"type": "string"}}},
                {"properties": {"q": {"type": "string"}}},
            ],
        }
    return {"type": "object", "properties": {"root": node}}


def test_nested_unions_beside_properties_are_refused_at_the_node_bound_not_distributed() -> None:
    hostile = _unions_beside_properties(30)  # 2**30 copies if nothing bounded it
    with pytest.raises(SchemaExportError, match="schema nodes"):
        distribute_unions(hostile, target="Gemini")
    with pytest.raises(SchemaExportError):
        anthropic_strict_schema(hostile)
    with pytest.raises(SchemaExportError):
        gemini_schema(hostile)


def test_a_few_nested_unions_beside_properties_still_distribute() -> None:
    distributed = distribute_unions(_unions_beside_properties(3), target="Gemini")
    assert "anyOf" in distributed["properties"]["root"]

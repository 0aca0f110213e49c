"""Property tests: strict export of random schemas keeps every valid input and OpenAI's rules."""

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sagents.tool._json_schema import iter_subschemas
from sagents.tool.openai_export import (
    faithful_schema,
    strict_absent_to_nulls,
    strict_nulls_to_absent,
    strict_schema,
)

NAMES = st.sampled_from(["a", "b", "title", "type", "a/b", "x~y", "名前", "default"])
Pair = tuple[dict[str, Any], Any]  # a schema and one instance it accepts


@st.composite
def leaf(draw: st.DrawFn) -> Pair:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "enum", "nullable"]))
    if kind == "string":
        return {"type": "string", "minLength": 1}, draw(st.text(min_size=1, max_size=5))
    if kind == "integer":
        return {"type": "integer", "minimum": 0}, draw(st.integers(0, 100))
    if kind == "number":
        return {"type": "number", "default": 1.5}, draw(st.floats(-5, 5))
    if kind == "boolean":
        return {"type": "boolean"}, draw(st.booleans())
    if kind == "enum":
        return {"type": "string", "enum": ["x", "y"]}, draw(st.sampled_from(["x", "y"]))
    value = draw(st.one_of(st.none(), st.text(max_size=3)))
    return {"anyOf": [{"type": "string"}, {"type": "null"}]}, value


def node(depth: int) -> st.SearchStrategy[Pair]:
    if depth == 0:
        return leaf()
    return st.one_of(leaf(), obj(depth - 1), array(depth - 1))


@st.composite
def array(draw: st.DrawFn, depth: int) -> Pair:
    items, _ = draw(node(depth))
    values = [draw(_instance_of(items)) for _ in range(draw(st.integers(0, 2)))]
    return {"type": "array", "items": items, "maxItems": 5}, values


@st.composite
def _instance_of(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    # Regenerate a value for a known schema shape (used for array items).
    return draw(_values(schema))


def _values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "anyOf" in schema:
        return st.one_of(st.none(), st.text(max_size=3))
    kind = schema.get("type")
    if kind == "string":
        return st.sampled_from(schema["enum"]) if "enum" in schema else st.text(min_size=1)
    if kind == "integer":
        return st.integers(0, 100)
    if kind == "number":
        return st.floats(-5, 5)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(_values(schema["items"]), max_size=2)
    props = schema["properties"]
    required = schema.get("required", [])
    return st.fixed_dictionaries(
        {k: _values(props[k]) for k in required},
        optional={k: _values(v) for k, v in props.items() if k not in required},
    )


@st.composite
def obj(draw: st.DrawFn, depth: int) -> Pair:
    names = draw(st.lists(NAMES, unique=True, max_size=4))
    properties: dict[str, Any] = {}
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


def _objects(schema: Any, path: str = "") -> list[dict[str, Any]]:
    found = [schema] if isinstance(schema, dict) and "properties" in schema else []
    if isinstance(schema, dict):
        for _, child_path, child in iter_subschemas(schema, path):
            found.extend(_objects(child, child_path))
    return found


def _nodes(schema: Any, path: str = "") -> list[dict[str, Any]]:
    found = [schema] if isinstance(schema, dict) else []
    if isinstance(schema, dict):
        for _, child_path, child in iter_subschemas(schema, path):
            found.extend(_nodes(child, child_path))
    return found


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


@given(obj(2))
def test_strict_export_accepts_every_valid_input_in_its_strict_form(pair: Pair) -> None:
    schema, instance = pair
    before = copy.deepcopy(schema)
    assert Draft202012Validator(schema).is_valid(instance)
    strict = strict_schema(schema)
    sent = strict_absent_to_nulls(strict, instance)
    assert strict.validator.is_valid(sent)
    received = strict_nulls_to_absent(strict, sent)
    assert Draft202012Validator(schema).is_valid(received)
    assert _drop_nulls(received) == _drop_nulls(instance)
    assert Draft202012Validator(faithful_schema(schema)).is_valid(instance)
    assert schema == before


@given(obj(2))
def test_every_strict_object_is_closed_and_requires_all_its_properties(pair: Pair) -> None:
    strict = strict_schema(pair[0]).schema
    Draft202012Validator.check_schema(dict(strict))
    for found in _objects(strict):
        assert found["additionalProperties"] is False
        assert found["required"] == list(found["properties"])
    for ref_site in _nodes(strict):
        assert "$ref" not in ref_site or list(ref_site) == ["$ref"]
    assert "minLength" not in str(strict) or "(minLength" in str(strict)

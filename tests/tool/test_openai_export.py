"""OpenAI export of any JSON Schema (MCP upstream shapes included): faithful and strict."""

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from sagents.core._spec import ToolSpec
from sagents.errors import InvalidArgumentsError, SchemaExportError
from sagents.tool._json_schema import clean_schema, strip_titles
from sagents.tool.openai_export import (
    faithful_schema,
    strict_absent_to_nulls,
    strict_nulls_to_absent,
    strict_schema,
    to_openai_tool,
)

RECURSIVE: dict[str, Any] = {
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/Node"}},
    "required": ["root"],
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["label"],
        }
    },
}


def test_openai_tool_has_the_chat_completions_shape() -> None:
    spec = ToolSpec(name="fleet__get.status", description="Status.", input_schema=RECURSIVE)
    exported = to_openai_tool(spec)
    assert exported["type"] == "function"
    assert set(exported["function"]) == {"name", "description", "parameters"}
    assert exported["function"]["name"].startswith("fleet__get_status_")
    assert exported["function"]["description"] == "Status."
    strict = to_openai_tool(spec, strict=True, name="status")
    assert strict["function"]["strict"] is True
    assert strict["function"]["name"] == "status"


def test_faithful_export_adds_a_missing_root_type_and_array_items() -> None:
    exported = faithful_schema({"properties": {"xs": {"type": "array"}}})
    assert exported == {"type": "object", "properties": {"xs": {"type": "array", "items": {}}}}


def test_faithful_export_inlines_a_root_ref_and_keeps_defs() -> None:
    node = RECURSIVE["$defs"]["Node"]
    schema = {"$ref": "#/$defs/Args", "$defs": {"Args": node, "Node": node}}
    exported = faithful_schema(schema)
    assert exported["type"] == "object"
    assert "$ref" not in exported
    assert exported["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert exported["$defs"] == schema["$defs"]
    validator = Draft202012Validator(exported)
    assert validator.is_valid({"label": "a", "children": []})
    assert not validator.is_valid({"children": []})


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "other.json#/A"}}}, "outside"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}, "does not resolve"),
        ({"type": "array"}, "type 'object'"),
        ({"$ref": "#", "type": "object"}, "circular"),
        ({"$ref": "#/$defs/A", "$defs": {"A": True}}, "object schema"),
        (
            {"$ref": "#/$defs/A", "required": ["x"], "$defs": {"A": {"required": ["y"]}}},
            "both set 'required'",
        ),
    ],
)
def test_faithful_export_fails_clearly_on_unusable_schemas(
    schema: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(SchemaExportError, match=fragment) as caught:
        faithful_schema(schema)
    assert caught.value.code == "unexportable_schema"
    assert "path" in caught.value.details


def test_faithful_export_is_self_contained_and_accepts_the_same_inputs() -> None:
    exported = faithful_schema(RECURSIVE)
    original, faithful = Draft202012Validator(RECURSIVE), Draft202012Validator(exported)
    samples = [
        {"root": {"label": "a"}},
        {"root": {"label": "a", "children": [{"label": "b"}]}},
        {"root": {"children": []}},
        {"root": {"label": "a", "children": [{}]}},
        {},
    ]
    assert [original.is_valid(s) for s in samples] == [faithful.is_valid(s) for s in samples]


def test_strict_export_handles_recursive_refs_without_recursing_forever() -> None:
    strict = strict_schema(RECURSIVE)
    node = strict.schema["$defs"]["Node"]
    assert node["required"] == ["label", "children"]
    assert node["additionalProperties"] is False
    assert node["properties"]["children"]["type"] == ["array", "null"]
    sent: dict[str, Any] = {"root": {"label": "a", "children": [{"label": "b", "children": None}]}}
    assert strict.validator.is_valid(sent)
    assert strict_nulls_to_absent(strict, sent) == {
        "root": {"label": "a", "children": [{"label": "b"}]}
    }


def test_strict_export_makes_every_property_required_and_optional_ones_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "default": 10},
            "mode": {"enum": ["a", "b"], "type": "string"},
            "where": {"$ref": "#/$defs/Where"},
        },
        "required": ["q"],
        "$defs": {"Where": {"type": "object", "properties": {"x": {"type": "number"}}}},
    }
    strict = strict_schema(schema).schema
    assert strict["required"] == ["q", "limit", "mode", "where"]
    assert strict["properties"]["q"] == {"type": "string", "description": "(minLength: 1)"}
    assert strict["properties"]["limit"]["type"] == ["integer", "null"]
    assert strict["properties"]["mode"]["enum"] == ["a", "b", None]
    assert strict["properties"]["where"] == {"anyOf": [{"$ref": "#/$defs/Where"}, {"type": "null"}]}
    assert strict["$defs"]["Where"]["required"] == ["x"]
    assert strict["$defs"]["Where"]["properties"]["x"]["type"] == ["number", "null"]


def test_strict_export_removes_unsupported_keywords_into_the_description() -> None:
    schema = {
        "type": "object",
        "properties": {
            "xs": {
                "type": "array",
                "items": {"type": "string", "format": "uri"},
                "uniqueItems": True,
                "description": "Links.",
            },
            "n": {"type": "integer", "not": {"const": 3}, "minimum": 0},
        },
        "required": ["xs", "n"],
    }
    strict = strict_schema(schema).schema
    xs = strict["properties"]["xs"]
    assert xs["description"] == "Links. (uniqueItems: true)"
    assert xs["items"] == {"type": "string", "description": '(format: "uri")'}
    assert strict["properties"]["n"]["minimum"] == 0
    assert "not" not in strict["properties"]["n"]
    assert '"const": 3' in strict["properties"]["n"]["description"]


def test_strict_export_turns_one_of_into_any_of_and_merges_a_single_all_of() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "w": {"allOf": [{"$ref": "#/$defs/W"}], "description": "A w."},
        },
        "required": ["v", "w"],
        "$defs": {"W": {"type": "object", "properties": {"k": {"type": "string"}}}},
    }
    strict = strict_schema(schema).schema
    assert strict["properties"]["v"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert strict["properties"]["w"] == {  # strict mode allows nothing beside a $ref
        "type": "object",
        "properties": {"k": {"type": ["string", "null"]}},
        "required": ["k"],
        "additionalProperties": False,
        "description": "A w.",
    }


def test_a_described_ref_into_a_recursive_definition_becomes_a_one_member_any_of() -> None:
    schema = {
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/Node", "description": "The first node."}},
        "required": ["head"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/Node", "description": "Then."}},
                "required": ["next"],
            }
        },
    }
    strict = strict_schema(schema).schema
    assert strict["properties"]["head"] == {
        "anyOf": [{"$ref": "#/$defs/Node"}],
        "description": "The first node.",
    }
    assert strict["$defs"]["Node"]["properties"]["next"]["anyOf"] == [{"$ref": "#/$defs/Node"}]


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "object", "properties": {"a": {}}}, "/properties/a"),
        ({"type": "object", "properties": {"a": True}}, "/properties/a"),
        (
            {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {}}}},
            "/properties/m",
        ),
        ({"type": "object", "properties": {"m": {"type": "object"}}}, "/properties/m"),
        (
            {
                "type": "object",
                "properties": {"a": {"allOf": [{"pattern": "^a"}, {"pattern": "b"}]}},
            },
            "/properties/a",
        ),
        ({"type": "object", "properties": {"xs": {"type": "array"}}}, "/properties/xs/items"),
        ({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, ""),
    ],
)
def test_strict_export_refuses_what_it_cannot_express_and_names_the_place(
    schema: dict[str, Any], path: str
) -> None:
    with pytest.raises(SchemaExportError) as caught:
        strict_schema(schema)
    assert caught.value.details["path"] == path


def test_a_failing_rewrite_leaves_its_input_unchanged() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "ok": {"type": "string", "default": "x", "title": "Ok"},
            "fine": {"$ref": "#/$defs/Fine"},
            "bad": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "$defs": {"Fine": {"type": "object", "properties": {"z": {"type": "integer"}}}},
    }
    before = copy.deepcopy(schema)
    with pytest.raises(SchemaExportError):
        strict_schema(schema)  # fails at "bad", after rewriting "ok" and "fine"
    assert schema == before
    faithful_schema(schema)
    strict_schema({k: v for k, v in schema.items() if k != "properties"} | {"properties": {}})
    assert schema == before


def test_nulls_map_back_to_absent_only_for_originally_optional_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "must": {"type": ["string", "null"]},
            "may": {"type": "string"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"a/b": {"type": "integer"}, "c": {"type": "integer"}},
                    "required": ["c"],
                },
            },
        },
        "required": ["must"],
    }
    strict = strict_schema(schema)
    sent: dict[str, Any] = {
        "must": None,
        "may": None,
        "items": [{"a/b": None, "c": 1}, {"a/b": 2, "c": 3}],
    }
    assert strict.validator.is_valid(sent)
    received = strict_nulls_to_absent(strict, sent)
    assert received == {"must": None, "items": [{"c": 1}, {"a/b": 2, "c": 3}]}
    assert sent["may"] is None  # the input is not changed
    assert strict_absent_to_nulls(strict, received) == sent


def test_nulls_map_back_inside_any_of_branches() -> None:
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "anyOf": [
                    {"type": "object", "properties": {"id": {"type": "integer"}}, "required": []},
                    {"type": "string"},
                ]
            }
        },
        "required": ["target"],
    }
    strict = strict_schema(schema)
    assert strict_nulls_to_absent(strict, {"target": {"id": None}}) == {"target": {}}
    assert strict_nulls_to_absent(strict, {"target": "x"}) == {"target": "x"}


def test_strip_titles_keeps_a_property_named_title() -> None:
    schema = {
        "title": "Args",
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string"}},
        "additionalProperties": True,
    }
    assert strip_titles(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "additionalProperties": True,
    }
    assert clean_schema(schema) == {"type": "object", "properties": {"title": {"type": "string"}}}
    assert schema["title"] == "Args"


def test_draft_07_definitions_and_tuple_items_are_handled() -> None:
    schema = {
        "type": "object",
        "properties": {
            "p": {"$ref": "#/definitions/P"},
            "pair": {
                "type": "array",
                "items": [{"type": "integer"}, {"type": "string"}],
                "maxItems": 2,
            },
        },
        "required": ["p", "pair"],
        "definitions": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    assert faithful_schema(schema)["definitions"] == schema["definitions"]
    strict = strict_schema(schema).schema
    assert strict["properties"]["pair"]["items"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}]
    }
    assert strict["definitions"]["P"]["additionalProperties"] is False


def test_absurdly_deep_schemas_and_arguments_fail_clearly() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"]}
    with pytest.raises(SchemaExportError, match="nested too deeply"):
        faithful_schema(deep)
    with pytest.raises(SchemaExportError, match="nested too deeply"):
        strict_schema(deep)
    strict = strict_schema(RECURSIVE)
    args: dict[str, Any] = {"label": "leaf", "children": []}
    for _ in range(5000):
        args = {"label": "n", "children": [args]}
    with pytest.raises(InvalidArgumentsError):
        strict_nulls_to_absent(strict, {"root": args})

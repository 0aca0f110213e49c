"""The OpenAI Agents SDK's schema cases, run against ``@tool``, ``get_openai_tools`` and
``strict_schema``.

Sources (openai/openai-agents-python): ``tests/test_strict_schema.py``
(``ensure_strict_json_schema``), ``tests/test_function_schema.py`` (``function_schema``) and
``tests/test_function_tool.py`` (``function_tool``). Each case names its test there. ``SAME``
means sagents decides like the SDK; ``DIFFERENT`` marks a deliberate difference, explained in
docs/tool-schema.md ("Peer suites").
"""

from typing import Annotated, Any

import pytest
from jsonschema import Draft202012Validator

from sagents.errors import SchemaExportError, ToolDefinitionError
from sagents.tool import ToolManager
from sagents.tool.openai_export import strict_absent_to_nulls, strict_schema
from tests.tool.test_strict_hand_written import _assert_openai_strict_rules

Schema = dict[str, Any]
T_OBJECT: Schema = {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}

# (SDK test, schema, SDK accepts, sagents accepts, samples: (instance, original accepts))
STRICT_CASES: list[tuple[str, Schema, bool, bool, list[tuple[Any, bool]]]] = [
    (  # SAME
        "test_object_without_additional_properties",
        {"type": "object", "properties": {"a": {"type": "string"}}},
        True,
        True,
        [({"a": "x"}, True), ({"a": 1}, False)],
    ),
    (  # SAME
        "test_typeless_root_is_normalized_to_object",
        {"properties": {"a": {"type": "string"}}},
        True,
        True,
        [({"a": "x"}, True)],
    ),
    ("test_open_map_root_errors", {"additionalProperties": {"type": "string"}}, False, False, []),
    (
        "test_nested_typeless_open_map_errors",
        {"type": "object", "properties": {"m": {"additionalProperties": {"type": "string"}}}},
        False,
        False,
        [],
    ),
    (
        "test_union_root_errors",
        {"anyOf": [{"properties": {"a": {"type": "string"}}}, {"type": "null"}]},
        False,
        False,
        [],
    ),
    (  # SAME: a typeless object node gets type object (property, array item, anyOf branch)
        "test_nested_typeless_objects_get_additional_properties",
        {
            "type": "object",
            "properties": {"value": {"anyOf": [{"properties": {}}, {"type": "null"}]}},
        },
        True,
        True,
        [({"value": {}}, True), ({"value": None}, True)],
    ),
    (
        "test_object_with_true_additional_properties",
        {"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": True},
        False,
        False,
        [],
    ),
    (
        "test_object_with_empty_dict_additional_properties",
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {}},
        False,
        False,
        [],
    ),
    (
        "test_object_with_schema_additional_properties",
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        },
        False,
        False,
        [],
    ),
    (
        "test_allOf_single_ref_entry_merging",
        {
            "$defs": {"Inner": T_OBJECT, "Outer": {"$ref": "#/$defs/Inner"}},
            "type": "object",
            "allOf": [{"$ref": "#/$defs/Outer"}],
        },
        True,
        True,
        [({"b": "x"}, True), ({}, False), ({"b": 1}, False)],
    ),
    (  # DIFFERENT: the SDK refuses to merge a singleton allOf with overlapping parent
        # keywords; sagents merges the properties (JSON Schema applies both) and exports it.
        "test_allOf_single_ref_entry_rejects_overlapping_parent_constraints",
        {
            "$defs": {"T": {"type": "object", "properties": {"inner": {"type": "string"}}}},
            "type": "object",
            "properties": {"outer": {"type": "string"}},
            "allOf": [{"$ref": "#/$defs/T", "description": "alias"}],
        },
        False,
        True,
        [({"outer": "a", "inner": "b"}, True), ({"inner": 1}, False), ({"outer": 1}, False)],
    ),
    (  # SAME: 1 and true are different JSON values
        "test_allOf_single_ref_entry_rejects_json_distinct_equal_python_values",
        {"$defs": {"T": {"const": 1}}, "const": True, "allOf": [{"$ref": "#/$defs/T"}]},
        False,
        False,
        [],
    ),
    (  # DIFFERENT: the SDK refuses a nested $id; sagents resolves against its resource.
        "test_nested_ref_with_id_is_rejected_before_resolution",
        {
            "$defs": {"T": {"type": "string"}},
            "type": "object",
            "properties": {
                "value": {
                    "$id": "https://example.test/nested",
                    "$defs": {"T": {"type": "integer"}},
                    "$ref": "#/$defs/T",
                }
            },
        },
        False,
        True,
        [({"value": 1}, True), ({"value": "a"}, False)],
    ),
    (  # SAME
        "test_ref_expansion",
        {
            "definitions": {"refObj": {"type": "string", "default": None}},
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/refObj", "description": "desc"}},
        },
        True,
        True,
        [({"a": "x"}, True), ({"a": 1}, False)],
    ),
    (  # SAME
        "test_chained_ref_with_sibling_keys_is_resolved",
        {
            "$defs": {"Inner": {"type": "string"}, "Outer": {"$ref": "#/$defs/Inner"}},
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/Outer", "description": "desc"}},
        },
        True,
        True,
        [({"a": "x"}, True), ({"a": 1}, False)],
    ),
    (  # DIFFERENT: the SDK refuses (parent-wins merging would drop constraints); sagents
        # merges both sides' properties and required names, which is what JSON Schema means.
        "test_ref_with_incompatible_sibling_is_rejected",
        {
            "$defs": {"T": T_OBJECT},
            "type": "object",
            "properties": {
                "node": {
                    "properties": {"a": {"type": "string"}},
                    "required": ["a"],
                    "$ref": "#/$defs/T",
                }
            },
            "required": ["node"],
        },
        False,
        True,
        [({"node": {"a": "x", "b": "y"}}, True), ({"node": {"a": "x"}}, False)],
    ),
    (  # SAME: string and object share no value
        "test_ref_with_incompatible_type_sibling_is_rejected",
        {
            "$defs": {"T": T_OBJECT},
            "type": "object",
            "properties": {"node": {"type": "string", "$ref": "#/$defs/T"}},
        },
        False,
        False,
        [],
    ),
    (
        "test_ref_with_single_all_of_sibling_is_rejected",
        {
            "$defs": {"A": {"type": "string"}, "B": {"type": "integer"}},
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/A", "allOf": [{"$ref": "#/$defs/B"}]}},
        },
        False,
        False,
        [],
    ),
    (  # DIFFERENT: minLength beside the $ref is merged (and, outside strict's keywords, folded
        # into the description; the original is still checked after the call).
        "test_ref_with_validation_sibling_is_rejected",
        {
            "$defs": {"T": {"type": "string"}},
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/T", "minLength": 1}},
            "required": ["node"],
        },
        False,
        True,
        [({"node": "a"}, True), ({"node": 1}, False)],
    ),
    (  # SAME: a closed, property-less node next to a target requiring "b" accepts nothing
        "test_ref_with_interacting_object_sibling_is_rejected",
        {
            "$defs": {"T": {**T_OBJECT, "additionalProperties": False}},
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/T", "additionalProperties": False}},
        },
        False,
        False,
        [],
    ),
    (  # SAME
        "test_ref_with_annotation_sibling_is_still_expanded",
        {
            "$defs": {"T": T_OBJECT},
            "type": "object",
            "properties": {
                "node": {
                    "contentMediaType": "application/json",
                    "description": "a node",
                    "$ref": "#/$defs/T",
                }
            },
            "required": ["node"],
        },
        True,
        True,
        [({"node": {"b": "x"}}, True), ({"node": {}}, False)],
    ),
]


@pytest.mark.parametrize(
    ("schema", "sdk_accepts", "accepts", "samples"),
    [c[1:] for c in STRICT_CASES],
    ids=[c[0] for c in STRICT_CASES],
)
def test_the_sdks_strict_schema_cases(
    schema: Schema, sdk_accepts: bool, accepts: bool, samples: list[tuple[Any, bool]]
) -> None:
    del sdk_accepts  # recorded for the comparison in docs/tool-schema.md
    if not accepts:
        with pytest.raises(SchemaExportError):
            strict_schema(schema)
        return
    strict = strict_schema(schema)
    _assert_openai_strict_rules(dict(strict.schema))
    original = Draft202012Validator(schema)
    for instance, valid in samples:
        assert original.is_valid(instance) == valid, instance  # the labels are right
        if valid:  # what the original accepts, strict accepts (in its strict form)
            assert strict.validator.is_valid(strict_absent_to_nulls(strict, instance)), instance


def test_the_sdks_exponential_ref_ladder_is_exported_linearly() -> None:
    # test_strict_schema.py::test_ref_expansion_bomb_is_rejected. DIFFERENT: the SDK refuses
    # the 30-rung ladder (its refs carry only titles); sagents drops titles and keeps the refs.
    defs: Schema = {
        f"L{i}": {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/$defs/L{i + 1}", "title": "t"},
                "b": {"$ref": f"#/$defs/L{i + 1}", "title": "t"},
            },
        }
        for i in range(30)
    }
    defs["L30"] = {"type": "string"}
    schema = {"$defs": defs, "type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}}
    strict = strict_schema(schema)
    assert len(str(strict.schema)) < 10 * len(str(schema))


def test_deeply_nested_schemas_are_refused_before_recursing() -> None:
    # test_strict_schema.py::test_deeply_nested_schema_is_rejected_before_recursive_conversion
    root: Schema = {"type": "object", "properties": {}}
    current = root
    for _ in range(1000):
        child: Schema = {"type": "object", "properties": {}}
        current["properties"] = {"child": child}
        current = child
    with pytest.raises(SchemaExportError, match="nested too deeply"):
        strict_schema(root)


# -- function_schema / function_tool ----------------------------------------------------------


def _function(func: Any) -> dict[str, Any]:
    manager = ToolManager()
    manager.register_tool(func)
    (tool,) = manager.get_openai_tools(strict=True)
    function: dict[str, Any] = tool["function"]
    return function


def test_simple_function_and_google_docs() -> None:
    # test_function_schema.py::test_simple_function, ::test_complex_args_and_docs_function
    def simple(a: int, b: int = 5) -> int:
        """Args:
        a: The first argument
        b: The second argument
        """
        return a + b

    function = _function(simple)
    assert function["strict"] is True
    props = function["parameters"]["properties"]
    assert props["a"] == {"description": "The first argument", "type": "integer"}
    # DIFFERENT: the SDK keeps b required with its default; sagents makes it nullable and
    # maps null back to "absent" (so the default applies), which strict mode cannot say otherwise.
    assert props["b"]["type"] == ["integer", "null"]


def test_google_docstring_missing_blank_line_before_args() -> None:
    # test_function_schema.py::test_google_docstring_missing_blank_line_before_args (SAME)
    def weather(city: str, units: str) -> str:
        """Get the weather for a city.
        Args:
            city: The city to get weather for.
            units: Temperature units to use.
        """
        return city + units

    function = _function(weather)
    assert function["description"] == "Get the weather for a city."
    assert function["parameters"]["properties"]["city"]["description"] == (
        "The city to get weather for."
    )


def test_annotated_descriptions_and_docstrings() -> None:
    # test_function_schema.py::test_function_prefers_docstring_descriptions_over_annotated_metadata
    # DIFFERENT: the SDK lets the docstring win; sagents lets the annotation win (it sits on
    # the parameter itself, and docs/tool-schema.md says so).
    def add(a: Annotated[int, "Annotated a"], b: Annotated[int, "Annotated b"]) -> int:
        """Adds two integers.

        Args:
            a: Docstring a.
        """
        return a + b

    props = _function(add)["parameters"]["properties"]
    assert props["a"]["description"] == "Annotated a"
    assert props["b"]["description"] == "Annotated b"


def test_varargs_are_refused() -> None:
    # test_function_schema.py::test_varargs_function. DIFFERENT: the SDK turns *args into a
    # list and **kwargs into a map; sagents refuses them (a model sends named arguments only,
    # and an open map is not expressible in strict mode).
    def varargs(x: int, *numbers: float, **kwargs: Any) -> None:
        return None

    with pytest.raises(ToolDefinitionError, match=r"\*numbers"):
        _function(varargs)


def test_a_mapping_parameter_falls_back_to_faithful_export() -> None:
    # test_function_schema.py::test_schema_with_mapping_raises_strict_mode_error. DIFFERENT:
    # the SDK raises; sagents exports that tool without "strict" and logs a warning.
    def with_map(m: dict[str, int]) -> None:
        return None

    function = _function(with_map)
    assert "strict" not in function
    assert function["parameters"]["properties"]["m"]["additionalProperties"] == {"type": "integer"}

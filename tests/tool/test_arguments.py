"""Argument parsing, lenient coercion and validation against JSON Schema (docs/tools.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.errors import InvalidArgumentsError, ToolDefinitionError
from sagents.tool._arguments import (
    MAX_ARGUMENTS_BYTES,
    MAX_REPORTED_PROBLEMS,
    ArgumentValidator,
    parse_arguments,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "name": {"type": "string"},
        "point": {"$ref": "#/$defs/Point"},
        "tags": {"type": "array", "items": {"type": "integer"}},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "limit": {"type": "integer", "default": 10},
    },
    "required": ["count"],
    "$defs": {
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        }
    },
}


_VALIDATOR = ArgumentValidator(SCHEMA)


def _validate(arguments: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
    return _VALIDATOR.validate("t", arguments, strict=strict)


@pytest.mark.parametrize(
    ("given_args", "expected"),
    [
        ({"count": "5"}, {"count": 5}),
        ({"count": " -7 "}, {"count": -7}),
        ({"count": "5.0"}, {"count": 5}),
        ({"count": 1, "ratio": "2.5"}, {"count": 1, "ratio": 2.5}),
        ({"count": 1, "ratio": "1e3"}, {"count": 1, "ratio": 1000.0}),
        ({"count": 1, "flag": "true"}, {"count": 1, "flag": True}),
        ({"count": 1, "flag": "False"}, {"count": 1, "flag": False}),
        ({"count": 1, "tags": "[1, 2]"}, {"count": 1, "tags": [1, 2]}),
        ({"count": 1, "tags": ["1", 2]}, {"count": 1, "tags": [1, 2]}),
        (
            {"count": 1, "point": '{"x": "3", "y": "0.5"}'},
            {"count": 1, "point": {"x": 3, "y": 0.5}},
        ),
        ({"count": 1, "maybe": "4"}, {"count": 1, "maybe": 4}),
        ({"count": 1, "name": "5"}, {"count": 1, "name": "5"}),
    ],
)
def test_common_mistakes_are_coerced_where_the_schema_says_so(
    given_args: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert _validate(given_args) == expected


def test_an_explicit_null_is_kept_where_the_schema_accepts_it() -> None:
    assert _validate({"count": 1, "maybe": None}) == {"count": 1, "maybe": None}


def test_null_for_an_optional_parameter_that_rejects_null_means_absent() -> None:
    assert _validate({"count": 1, "limit": None}) == {"count": 1}


def test_strict_calls_map_null_for_optional_parameters_to_absent() -> None:
    assert _validate({"count": 1, "maybe": None, "limit": None}, strict=True) == {"count": 1}


def test_null_for_a_required_parameter_is_an_error_even_in_strict_mode() -> None:
    with pytest.raises(InvalidArgumentsError) as caught:
        _validate({"count": None}, strict=True)
    assert caught.value.details["problems"] == [
        {"path": "/count", "expected": "integer", "got": "null (null)"}
    ]


def test_every_problem_is_listed_with_path_expected_and_got() -> None:
    with pytest.raises(InvalidArgumentsError) as caught:
        _validate({"ratio": "lots", "point": {"x": "a"}, "tags": [1, "two"]})
    problems = {p["path"]: p for p in caught.value.details["problems"]}
    assert set(problems) == {"/count", "/ratio", "/point/x", "/point/y", "/tags/1"}
    assert problems["/count"]["got"] == "nothing"
    assert problems["/ratio"] == {"path": "/ratio", "expected": "number", "got": '"lots" (string)'}
    assert "/tags/1" in caught.value.message


def test_the_number_of_listed_problems_is_capped() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(50)}}
    with pytest.raises(InvalidArgumentsError) as caught:
        ArgumentValidator(schema).validate("t", {f"p{i}": "x" for i in range(50)})
    assert len(caught.value.details["problems"]) == MAX_REPORTED_PROBLEMS
    assert "and 30 more" in caught.value.message


def test_enum_values_are_named_in_the_error() -> None:
    schema = {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}}
    with pytest.raises(InvalidArgumentsError, match='one of "c", "f"'):
        ArgumentValidator(schema).validate("t", {"unit": "k"})


def test_the_callers_arguments_are_not_mutated() -> None:
    original = {"count": "5", "limit": None}
    _validate(original)
    assert original == {"count": "5", "limit": None}


def test_an_invalid_schema_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="invalid input schema"):
        ArgumentValidator({"type": "object", "required": "count"})


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, {}), ("", {}), ("  ", {}), ('{"a": 1}', {"a": 1})]
)
def test_arguments_may_be_a_mapping_json_text_or_nothing(
    raw: str | None, expected: dict[str, Any]
) -> None:
    assert parse_arguments("t", raw) == expected


@pytest.mark.parametrize("raw", ["[1, 2]", "3", '"text"', "{broken"])
def test_arguments_that_are_not_a_json_object_are_refused(raw: str) -> None:
    with pytest.raises(InvalidArgumentsError, match="'t'"):
        parse_arguments("t", raw)


def test_arguments_over_the_size_cap_are_refused() -> None:
    big = {"text": "é" * (MAX_ARGUMENTS_BYTES // 2 + 10)}  # fewer characters than bytes
    with pytest.raises(InvalidArgumentsError, match="too large"):
        parse_arguments("t", big)
    with pytest.raises(InvalidArgumentsError, match="too large"):
        parse_arguments("t", json.dumps(big, ensure_ascii=False))


def test_recursive_refs_do_not_loop() -> None:
    schema = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
    }
    tree = {"value": "1", "children": [{"value": "2", "children": []}]}
    result = ArgumentValidator(schema).validate("t", {"tree": tree})
    assert result == {"tree": {"value": 1, "children": [{"value": 2, "children": []}]}}


@given(st.text())
def test_a_string_the_schema_accepts_is_never_changed(text: str) -> None:
    assert _validate({"count": 1, "name": text}) == {"count": 1, "name": text}


@given(st.integers())
def test_integers_sent_as_text_come_back_as_the_same_integer(number: int) -> None:
    assert _validate({"count": str(number)}) == {"count": number}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": 5}}},
        {"type": "object", "properties": {"a": {"minimum": "low"}}},
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": 1,
        },
    ],
)
def test_malformed_keywords_are_caught_with_or_without_a_declared_draft(
    schema: dict[str, Any],
) -> None:
    with pytest.raises(ToolDefinitionError):
        ArgumentValidator(schema)


def test_draft_2020_keywords_pass_the_check_and_are_enforced() -> None:
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "array", "prefixItems": [{"type": "integer"}]}},
        "dependentRequired": {"a": ["b"]},
    }
    validator = ArgumentValidator(schema)
    assert validator.validate("t", {"pair": ["1", "x"]}) == {"pair": [1, "x"]}
    with pytest.raises(InvalidArgumentsError):
        validator.validate("t", {"pair": ["x"]})


def test_a_valid_value_is_not_coerced_into_another_union_branch() -> None:
    schema = {
        "type": "object",
        "properties": {
            "filter": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}},
                        "required": ["id"],
                    },
                    {
                        "type": "object",
                        "properties": {"id": {"type": "string"}},
                        "required": ["id"],
                    },
                ]
            }
        },
    }
    validator = ArgumentValidator(schema)
    assert validator.validate("t", {"filter": {"id": "5"}}) == {"filter": {"id": "5"}}
    assert validator.validate("t", {"filter": {"id": "5"}}, strict=True) == {"filter": {"id": "5"}}

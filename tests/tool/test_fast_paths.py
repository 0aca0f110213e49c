"""The call path's fast paths give exactly what the full paths give.

Valid arguments pass a compiled validator (``jsonschema-rs``) and skip the ``jsonschema``
package; flat arguments skip the exact size measurement; plain numbers skip pydantic's
serialiser. Each must agree with the path it short-cuts.
"""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents.errors import InvalidArgumentsError, ResultSerializationError
from sagents.tool.arguments import MAX_ARGUMENTS_BYTES, ArgumentValidator, parse_arguments
from sagents.tool.result_conversion import to_tool_result

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]*$"},
        "point": {"$ref": "#/$defs/Point"},
        "tags": {"type": "array", "items": {"type": "integer"}},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "mode": {"enum": ["fast", "slow", 1]},
    },
    "required": ["count"],
    "additionalProperties": False,
    "$defs": {
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        }
    },
}

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "count": JSON_VALUES,
        "ratio": JSON_VALUES,
        "flag": JSON_VALUES,
        "name": JSON_VALUES,
        "point": JSON_VALUES
        | st.fixed_dictionaries({"x": st.integers(), "y": st.floats(allow_nan=False)}),
        "tags": JSON_VALUES | st.lists(st.integers(), max_size=3),
        "maybe": JSON_VALUES,
        "mode": st.sampled_from(["fast", "slow", 1, True, 1.0, "x"]),
        "extra": JSON_VALUES,
    },
)


@settings(max_examples=300, deadline=None)
@given(ARGUMENTS)
def test_the_compiled_check_agrees_with_the_jsonschema_package(arguments: dict[str, Any]) -> None:
    expected = jsonschema.Draft202012Validator(SCHEMA).is_valid(arguments)
    assert ArgumentValidator(SCHEMA).is_valid(arguments) is expected


def test_a_value_that_is_not_json_is_judged_by_the_jsonschema_package() -> None:
    schema = {"type": "object", "properties": {"anything": {}}}
    marker = object()
    assert ArgumentValidator(schema).validate("t", {"anything": marker}) == {"anything": marker}


def test_a_schema_with_a_remote_ref_validates_without_fetching_it() -> None:
    # Port 9 (discard) on loopback: a fetch would fail or hang; the validator must not try.
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "http://127.0.0.1:9/remote.json"}, "n": {"type": "integer"}},
    }
    validator = ArgumentValidator(schema, check=False)
    assert validator.validate("t", {"n": 1}) == {"n": 1}
    with pytest.raises(InvalidArgumentsError, match="expected integer"):
        validator.validate("t", {"n": "x"})


def test_invalid_arguments_get_the_same_error_after_the_compiled_check_refused_them() -> None:
    with pytest.raises(InvalidArgumentsError) as caught:
        ArgumentValidator(SCHEMA).validate("t", {"count": -1, "extra": 1})
    problems = caught.value.details["problems"]
    assert {p["path"] for p in problems} == {"/count", "/extra"}


def test_a_flat_but_too_large_argument_is_still_refused() -> None:
    with pytest.raises(InvalidArgumentsError, match="too large"):
        parse_arguments("t", {"text": "a" * (MAX_ARGUMENTS_BYTES + 1)})
    with pytest.raises(InvalidArgumentsError, match="too large"):
        parse_arguments("t", {f"k{i}": "\x01" * 1000 for i in range(MAX_ARGUMENTS_BYTES // 5000)})


@given(st.integers() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False))
def test_a_plain_number_result_reads_as_json_writes_it(value: int | float | bool) -> None:
    result = to_tool_result(value, tool_name="t", wrap_result=True)
    assert result.content[0].text == json.dumps(value)  # type: ignore[union-attr]
    assert result.structured == {"result": value}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_result_is_still_refused(value: float) -> None:
    with pytest.raises(ResultSerializationError, match=r"builtins\.float"):
        to_tool_result(value, tool_name="t")

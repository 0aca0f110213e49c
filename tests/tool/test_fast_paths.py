"""The call path's fast paths give exactly what the full paths give.

Valid arguments pass a compiled validator (``jsonschema-rs``) and skip the ``jsonschema``
package; flat arguments skip the exact size measurement; plain numbers skip pydantic's
serialiser. Each must agree with the path it short-cuts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import math
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import anyio
import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import Field

from sagents.core._result import TextContent, ToolResult
from sagents.errors import InvalidArgumentsError, ResultSerializationError
from sagents.tool import ToolCall, ToolManager
from sagents.tool._arguments import MAX_ARGUMENTS_BYTES, ArgumentValidator, parse_arguments
from sagents.tool._local_tool import build_local_tool
from sagents.tool._result_conversion import _text_result, to_tool_result

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


def test_a_result_built_on_the_fast_path_equals_the_constructed_one() -> None:
    built = _text_result("3", {"result": 3})
    assert built == ToolResult(content=(TextContent(text="3"),), structured={"result": 3})
    # Every field is set: a field added to the dataclasses must be added there too.
    assert set(vars(built)) == {f.name for f in dataclasses.fields(ToolResult)}
    assert set(vars(built.content[0])) == {f.name for f in dataclasses.fields(TextContent)}


@given(st.integers() | st.text(max_size=8), st.booleans())
def test_str_and_int_results_are_what_the_general_rules_give(value: int | str, wrap: bool) -> None:
    result = to_tool_result(value, tool_name="t", wrap_result=wrap)
    text = value if isinstance(value, str) else json.dumps(value)
    structured = {"result": value} if wrap else (None if isinstance(value, str) else value)
    assert result == ToolResult(content=(TextContent(text=text),), structured=structured)


async def _as_is_tool(  # type: ignore[no-untyped-def]  # one parameter unannotated (Any)
    count: int,
    ratio: float = 0.5,
    name: str | None = None,
    flag: bool = False,
    anything=None,
) -> None:
    """A tool whose every parameter pydantic returns as it is."""


async def _constrained_tool(
    count: Annotated[int, Field(ge=0)], tags: list[int] | None = None
) -> None:
    """A tool whose parameters need pydantic (a constraint, a list)."""


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
)
AS_IS_ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={key: SCALARS for key in ("count", "ratio", "name", "flag", "anything", "extra")},
)


def _outcome(bind: Callable[[], dict[str, Any]]) -> dict[str, Any] | str:
    try:
        return bind()
    except InvalidArgumentsError as error:
        return error.message


@functools.cache
def _as_is_local() -> tuple[Any, ArgumentValidator]:
    """The tool and its validator, built once for every example (building a tool creates a
    pydantic model, whose docstring lookup scans ``sys.modules``: slow enough, hundreds of times
    over under load, to reach the test's timeout)."""
    local = build_local_tool(_as_is_tool)
    return local, ArgumentValidator(local.spec.input_schema, check=False)


@given(AS_IS_ARGUMENTS)
@example({"count": 9.223372036854776e18})  # an integer to the schema, too large for pydantic
def test_arguments_passed_as_they_are_equal_what_pydantic_binds(arguments: dict[str, Any]) -> None:
    local, validator = _as_is_local()
    assert local._as_is is not None  # the tool qualifies for the shortcut
    if not validator.is_valid(arguments):
        return  # refused before binding, by the schema check's errors
    expected_or_error = _outcome(lambda: local.bind(arguments, None))
    bound_or_error = _outcome(lambda: local.bind_valid(dict(arguments), None))
    if isinstance(expected_or_error, str):  # the schema accepts what pydantic refuses
        assert bound_or_error == expected_or_error  # (9.2e18 for an int): the same error
        return
    expected, bound = expected_or_error, bound_or_error
    assert isinstance(bound, dict)
    for name in expected:  # an absent parameter takes the function's default, which is pydantic's
        value = bound.get(name, inspect.signature(_as_is_tool).parameters[name].default)
        assert value == expected[name]
        assert type(value) is type(expected[name])


def test_parameters_that_need_pydantic_are_bound_by_pydantic() -> None:
    local = build_local_tool(_constrained_tool)
    assert local._as_is is None
    assert local.bind_valid({"count": 1, "tags": [1]}, None) == {"count": 1, "tags": [1]}
    with pytest.raises(InvalidArgumentsError):
        local.bind_valid({"count": -1}, None)


async def _scalar_tool(
    count: int, ratio: float = 0.5, name: str | None = None, flag: bool = False
) -> dict[str, Any]:
    """A tool of bare scalar parameters only: run_tool passes valid arguments as they are."""
    values = {"count": count, "ratio": ratio, "name": name, "flag": flag}
    return {key: [value, type(value).__name__] for key, value in values.items()}


@contextlib.asynccontextmanager
async def _nothing(call: ToolCall) -> AsyncIterator[None]:
    yield


@functools.cache
def _scalar_managers() -> tuple[ToolManager, ToolManager]:
    """The same tool on the shortcut and, with a call context added, on the general path (built
    once: see :func:`_as_is_local`)."""
    short, general = ToolManager(), ToolManager()
    short.register_tool(_scalar_tool)
    general.register_tool(_scalar_tool)
    general.add_call_context(_nothing)
    return short, general


SCALAR_ARGUMENTS = st.fixed_dictionaries(
    {}, optional={key: SCALARS for key in ("count", "ratio", "name", "flag", "extra")}
)


@given(SCALAR_ARGUMENTS)
@example({"count": 2**63})  # an integer past 64 bits: measured and bound the general way
@example({"count": True})  # a bool is not an integer to the schema
@example({"count": 1, "ratio": 2})  # an int for a float: pydantic keeps it an int
@example({"count": 1, "ratio": math.nan})  # not JSON: a float all the same, refused by neither
def test_scalar_arguments_give_what_the_general_path_gives(arguments: dict[str, Any]) -> None:
    short, general = _scalar_managers()
    sent = dict(arguments)
    expected = anyio.run(general.run_tool, "_scalar_tool", dict(arguments))
    got = anyio.run(short.run_tool, "_scalar_tool", sent)
    assert got == expected
    assert sent == arguments  # the caller's dict is not changed


def test_a_scalar_tool_still_refuses_too_large_and_unknown_arguments() -> None:
    short, _ = _scalar_managers()
    large_name = "a" * MAX_ARGUMENTS_BYTES
    large = anyio.run(short.run_tool, "_scalar_tool", {"count": 1, "name": large_name})
    unknown = anyio.run(short.run_tool, "_scalar_tool", {"count": 1, "colour": "red"})
    assert large.error is not None
    assert "too large" in large.error.message
    assert unknown.error is not None
    assert unknown.error.message == (
        "invalid arguments for tool '_scalar_tool' (1 problem): "
        "/colour: expected no such property (declared: count, ratio, name, flag), "
        'got "red" (string)'
    )


def test_only_tools_of_bare_scalars_take_the_shortcut() -> None:
    assert build_local_tool(_scalar_tool).scalar_kinds == {
        "count": frozenset({int}),
        "ratio": frozenset({float}),
        "name": frozenset({str, type(None)}),
        "flag": frozenset({bool}),
    }
    assert build_local_tool(_as_is_tool).scalar_kinds is None  # an unannotated parameter
    assert build_local_tool(_constrained_tool).scalar_kinds is None

"""A tool schema's ``pattern`` and ``patternProperties`` (an upstream wrote them) are matched
against the model's arguments in linear time, by both validators (docs/tools.md, "One call";
docs/security.md): a catastrophic pattern gives its answer at once, and another call of the
same process is answered meanwhile."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from sagents.core._result import ToolResult
from sagents.errors import InvalidArgumentsError
from sagents.tool import ToolManager, tool
from sagents.tool._arguments import ArgumentValidator

BOUND_S = 60.0  # generous: each check takes microseconds in linear time
EVIL = "(a+)+$"
HOSTILE = "a" * 40 + "!"  # 2**40 steps for a backtracking engine


@tool
async def tag(label: Annotated[str, Field(pattern=EVIL)]) -> str:
    """Tag with a label of a's."""
    return label


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


@pytest.mark.anyio
async def test_a_catastrophic_schema_pattern_is_refused_at_once_while_another_call_runs() -> None:
    manager = ToolManager()
    manager.register_tool(tag)
    manager.register_tool(echo)
    results: dict[str, ToolResult] = {}

    async def call(key: str, name: str, arguments: dict[str, Any]) -> None:
        results[key] = await manager.run_tool(name, arguments)

    with anyio.fail_after(BOUND_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "evil", "tag", {"label": HOSTILE})
            tg.start_soon(call, "other", "echo", {"text": "still answered"})
    assert results["evil"].error is not None
    assert results["evil"].error.code == "invalid_arguments"
    assert "/label" in results["evil"].text
    assert results["other"].text == "still answered"
    assert (await manager.run_tool("tag", {"label": "aaa"})).text == "aaa"


def test_pattern_properties_and_additional_properties_match_keys_in_linear_time() -> None:
    schema = {
        "type": "object",
        "patternProperties": {EVIL: {"type": "integer"}},
        "additionalProperties": False,
    }
    validator = ArgumentValidator(schema)
    with pytest.raises(InvalidArgumentsError) as caught:
        validator.validate("t", {HOSTILE: 1})
    assert caught.value.details["problems"][0]["path"] == f"/{HOSTILE}"
    with pytest.raises(InvalidArgumentsError) as wrong_type:
        validator.validate("t", {"aaa": "one"})
    assert wrong_type.value.details["problems"][0]["path"] == "/aaa"
    assert validator.validate("t", {"aaa": 1}) == {"aaa": 1}


def test_a_string_of_digits_for_a_number_is_checked_in_linear_time() -> None:
    validator = ArgumentValidator(
        {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
    )
    with pytest.raises(InvalidArgumentsError):
        validator.validate("t", {"n": "1" * 200_000 + "x"})
    assert validator.validate("t", {"n": "2.5"}) == {"n": 2.5}


def test_a_schema_pattern_re2_cannot_evaluate_is_left_to_the_server_that_wrote_it() -> None:
    validator = ArgumentValidator(
        {"type": "object", "properties": {"p": {"type": "string", "pattern": "^(?!admin)"}}}
    )
    assert validator.validate("t", {"p": "admin"}) == {"p": "admin"}
    with pytest.raises(InvalidArgumentsError):
        validator.validate("t", {"p": 5})

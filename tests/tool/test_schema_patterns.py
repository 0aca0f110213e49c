"""A tool schema's ``pattern`` and ``patternProperties`` (an upstream wrote them) are matched
against the model's arguments in linear time, by both validators (docs/tools.md, "One call";
docs/security.md): a catastrophic pattern gives its answer at once, and another call of the
same process is answered meanwhile."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import anyio
import anyio.to_thread
import pytest
from pydantic import Field

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import InvalidArgumentsError
from sagents.sandbox._patterns import LinearRegex, compile_regex
from sagents.tool import ToolManager, tool
from sagents.tool import _arguments as arguments_module
from sagents.tool._arguments import ArgumentValidator
from sagents.tool._export_strict import strict_schema
from sagents.tool._handler import ToolCall
from sagents.tool.openai_export import strict_nulls_to_absent

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


async def _echo_handler(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return ToolResult.from_text(str(len(arguments["s"])))


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


# RE2 and the regex crate are linear in the text, not in the pattern: over a 207-instruction
# program their automata fall back to simulating every state, ~15 ns a state per character,
# so 100,000 characters hold the thread for a third of a second and 4 MiB for over ten.
COSTLY = "(?:a|b)*a(?:a|b){200}c"
COSTLY_TEXT = "ab" * 50_000


class _Watched:
    """Stands for a compiled schema pattern: a match waits until the event loop's task
    releases it, which it can do only while the event loop is free."""

    def __init__(self, regex: LinearRegex) -> None:
        self._regex = regex
        self.programsize: int = regex.programsize
        self.started = threading.Event()
        self.released = threading.Event()
        self.held_the_loop = False

    def search(self, text: str) -> object | None:
        self.started.set()
        if not self.released.wait(BOUND_S):
            self.held_the_loop = True  # the loop's task could not run while this one waited
        return self._regex.search(text)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "text", [COSTLY_TEXT, COSTLY_TEXT + "a" * 201 + "c"], ids=["invalid", "valid"]
)
async def test_a_costly_schema_pattern_is_matched_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """The check runs in a worker thread where RE2 lets go of the interpreter, never by the
    compiled validator, which holds it: valid text too goes through the watched match."""
    watched = _Watched(compile_regex(COSTLY))
    monkeypatch.setattr(arguments_module, "_linear", lambda pattern: watched)
    manager = ToolManager()
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": COSTLY}}}
    manager.register_tool((ToolSpec(name="costly", input_schema=schema), _echo_handler))
    results: dict[str, ToolResult] = {}
    released: list[bool] = []

    async def costly() -> None:
        results["costly"] = await manager.run_tool("costly", {"s": text})

    async def release() -> None:
        released.append(await anyio.to_thread.run_sync(watched.started.wait, BOUND_S))
        watched.released.set()

    with anyio.fail_after(BOUND_S * 4):
        async with anyio.create_task_group() as tg:
            tg.start_soon(costly)
            tg.start_soon(release)
    assert released == [True]
    assert not watched.held_the_loop
    valid = text.endswith("c")
    assert results["costly"].is_error is not valid, results["costly"].text


def test_a_pattern_too_large_to_match_in_bounded_time_is_left_to_the_server() -> None:
    """``(?:a?){1000}a{1000}[^a]`` compiles to 3,012 RE2 instructions (over the bound): checking
    100,000 characters took 12 s holding the event loop; it is not checked here at all."""
    huge = "(?:a?){1000}a{1000}[^a]"
    validator = ArgumentValidator(
        {"type": "object", "properties": {"s": {"type": "string", "pattern": huge}}}
    )
    assert validator.validate("t", {"s": "a" * 100_000}) == {"s": "a" * 100_000}
    assert not validator.costly({"s": "a" * 100_000})
    with pytest.raises(InvalidArgumentsError):
        validator.validate("t", {"s": 5})


def test_reading_a_strict_answer_back_matches_its_branches_patterns_in_linear_time() -> None:
    """Choosing the ``anyOf`` branch of a strict answer checks the branches, patterns included
    (Python's ``re`` took 2**40 steps here)."""
    strict = strict_schema(
        {
            "type": "object",
            "properties": {
                "v": {
                    "anyOf": [
                        {"type": "string", "pattern": EVIL},
                        {"type": "object", "properties": {"n": {"type": "integer"}}},
                    ]
                }
            },
            "required": ["v"],
        }
    )
    assert strict_nulls_to_absent(strict, {"v": HOSTILE}) == {"v": HOSTILE}
    assert strict.validator.is_valid({"v": "aaa"})
    assert not strict.validator.is_valid({"v": HOSTILE})

"""Inside a script, an unknown tool gets the same "Did you mean" hint as a direct call, and an
uncaught ToolError's traceback shows the user's frames only (no ``agent_tools`` internals)."""

from __future__ import annotations

import textwrap

import anyio
import pytest

from sagents.script._values import ScriptRequest, ScriptRunResult
from tests.script.conftest import RUN_TIME_ONLY, RunnerFactory

pytestmark = pytest.mark.anyio


async def _run(make_runner: RunnerFactory, code: str) -> ScriptRunResult:
    runner = make_runner(limits=RUN_TIME_ONLY)  # these unknown names are the run's to hint at
    with anyio.fail_after(60):
        return await runner.run(ScriptRequest(code=textwrap.dedent(code), description="test"))


async def test_an_unknown_tool_in_a_script_suggests_the_close_callable_names(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import ToolError, call, call_many, call_raw, describe
        for attempt in (
            lambda: call("fleet__gte", {}),
            lambda: call_raw("fleet__gte", {}),
            lambda: describe("fleet__gte"),
            lambda: call_many("fleet__gte", [{}, {}]),
        ):
            try:
                attempt()
            except ToolError as error:
                print(error.code, "|", error.message)
        rows = call_many("fleet__gte", [{}], return_errors=True)
        print("returned", rows[0].message)
        try:
            call("zzzzzz", {})
        except ToolError as error:
            print("far", error.message)
        """,
    )
    assert result.status == "ok", result.output
    lines = result.output.splitlines()[1:]
    assert len(lines) == 6
    for line in lines[:5]:
        assert "Did you mean 'fleet__get'" in line, line
    assert lines[0].startswith("unknown_tool | ")
    assert "Did you mean" not in lines[5]


async def test_an_uncaught_tool_error_shows_only_the_users_frames(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import call

        def collect():
            return call("fleet__gett", {"sn": "A"})

        collect()
        """,
    )
    assert result.status == "error", result.output
    assert "Traceback" in result.output
    assert "in collect" in result.output
    assert "agent_tools.py" not in result.output
    assert "ToolError: fleet__gett: [unknown_tool]" in result.output
    assert "Did you mean 'fleet__get'" in result.output


async def test_a_syntax_error_shows_the_scripts_line_and_no_sandbox_frames(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(make_runner, "x = 1\nprint(x\n")
    assert result.status == "error", result.output
    assert "bootstrap.py" not in result.output
    assert "Traceback" not in result.output  # as `python script.py` shows it: no frames
    assert 'script.py", line 2' in result.output
    assert "SyntaxError: '(' was never closed" in result.output

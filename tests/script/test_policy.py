"""The pre-run check."""

from __future__ import annotations

import pytest

from sagents.errors import ScriptRejectedError
from sagents.script._policy import offered_specs, plan_script
from tests.script.conftest import SPECS


def test_read_only_tools_are_callable_unlisted_and_writes_only_when_listed() -> None:
    plan = plan_script(SPECS, ["fleet__set"], "auto")
    assert set(plan.callable) == {"fleet__get", "fleet__text", "fleet__fail", "fleet__set"}
    assert plan.needs_approval == ()
    unlisted = plan_script(SPECS, [], "auto")
    assert "fleet__set" not in unlisted.callable
    assert "not listed" in unlisted.refusals["fleet__set"]


def test_ask_mode_needs_one_approval_for_listed_writes_minus_session_allowed() -> None:
    assert plan_script(SPECS, ["fleet__set", "fleet__get"], "ask").needs_approval == ("fleet__set",)
    allowed = plan_script(SPECS, ["fleet__set"], "ask", session_allowed={"fleet__set"})
    assert allowed.needs_approval == ()


@pytest.mark.parametrize("tool", ["fleet__reboot", "fleet__long"])
def test_listing_a_destructive_or_long_task_tool_rejects_naming_it(tool: str) -> None:
    with pytest.raises(ScriptRejectedError, match=f"call '{tool}' directly") as caught:
        plan_script(SPECS, ["fleet__get", tool], "auto")
    assert caught.value.details["tools"] == [tool]


@pytest.mark.parametrize("tool", ["fleet__off", "shell", "run_script", "missing"])
def test_listing_a_tool_that_is_not_offered_rejects_the_run(tool: str) -> None:
    with pytest.raises(ScriptRejectedError, match="not available to scripts"):
        plan_script(SPECS, [tool], "auto")


def test_read_only_mode_offers_no_write_tools() -> None:
    names = [spec.name for spec in offered_specs(SPECS, "read_only")]
    assert "fleet__set" not in names
    assert "shell" not in names
    with pytest.raises(ScriptRejectedError, match="read-only mode"):
        plan_script(SPECS, ["fleet__set"], "read_only")


def test_rejecting_an_unknown_tool_does_not_tell_the_model_to_call_it_directly() -> None:
    with pytest.raises(ScriptRejectedError) as caught:
        plan_script(SPECS, ["missing"], "auto")
    assert "directly" not in f"{caught.value.message} {caught.value.hint}"
    assert caught.value.hint == "remove these tools from 'tools'"


def test_rejecting_a_destructive_tool_says_call_it_directly_once() -> None:
    with pytest.raises(ScriptRejectedError) as caught:
        plan_script(SPECS, ["fleet__reboot"], "auto")
    text = f"{caught.value.message} {caught.value.hint}"
    assert text.count("directly") == 1

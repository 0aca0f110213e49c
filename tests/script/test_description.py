"""run_script's generated description and the rule for offering it."""

from __future__ import annotations

from sagents.core._limits import ScriptLimits
from sagents.core._spec import ToolSource, ToolSpec
from sagents.script._description import (
    run_script_description,
    run_script_spec,
    should_offer_run_script,
)
from tests.script.conftest import SPECS


def test_run_script_is_offered_only_with_mcp_tools() -> None:
    assert should_offer_run_script(SPECS)
    local = [ToolSpec(name="add", permission="read_only", source=ToolSource(kind="local"))]
    assert not should_offer_run_script(local)
    assert not should_offer_run_script([])


def test_the_description_lists_callable_tools_with_their_rules_and_the_limits() -> None:
    text = run_script_description(SPECS, mode="ask", limits=ScriptLimits(max_calls=77))
    assert "- fleet__get (read-only): Get one device's status." in text
    assert "- fleet__set (write: list it in `tools`): Change a device's config." in text
    assert "- fleet__reboot (destructive: NOT callable from scripts" in text
    assert "fleet__off" not in text
    assert "- shell" not in text
    assert "77 tool calls per script" in text
    assert "approves them once" in text
    assert "call_many(tool, args_list, return_errors=False)" in text


def test_read_only_mode_leaves_write_tools_out_of_the_description() -> None:
    text = run_script_description(SPECS, mode="read_only")
    assert "fleet__set" not in text
    assert "approves" not in text


def test_the_spec_requires_code_and_description_and_tools_defaults_to_empty() -> None:
    spec = run_script_spec(SPECS, mode="auto")
    assert spec.name == "run_script"
    assert spec.input_schema["required"] == ["code", "description"]
    assert spec.input_schema["properties"]["tools"]["default"] == []
    assert spec.source.kind == "builtin"


def test_without_tool_lines_the_description_counts_the_tools_and_does_not_grow_with_them() -> None:
    many = [
        ToolSpec(
            name=f"fleet__tool{i}",
            description=f"Tool number {i}.",
            permission="read_only",
            source=ToolSource(kind="mcp", server="fleet"),
        )
        for i in range(1000)
    ]
    short = run_script_description(SPECS, mode="ask", list_tools=False)
    long = run_script_description(many, mode="ask", list_tools=False)
    assert "fleet__get" not in short
    assert "tools() lists them" in short
    assert "- 1000 tools of this session" in long
    assert abs(len(long) - len(short)) < 10  # only the count differs
    assert len(run_script_description(many, mode="ask")) > 20 * len(long)

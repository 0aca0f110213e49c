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
    assert "\nfleet:\n  get(*, sn: str = ...)\n" in text
    assert "\n  set(*, sn: str = ...)  [write: fleet__set]\n" in text
    assert "Not callable from scripts (call them directly): fleet__reboot, fleet__long" in text
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
    assert len(run_script_description(many, mode="ask")) > 3 * len(long)


def _many(count: int) -> list[ToolSpec]:
    return [
        ToolSpec(
            name=f"svc{i % 3}__tool{i}",
            description=f"Tool number {i}.",
            input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
            permission="read_only",
            source=ToolSource(kind="mcp", server=f"svc{i % 3}", original_name=f"tool{i}"),
        )
        for i in range(count)
    ]


def test_the_signatures_stay_within_their_token_budget_and_count_the_rest() -> None:
    from sagents.core._tokens import default_token_counter

    counter = default_token_counter()
    bare = counter.count(run_script_description([], mode="ask"))
    text = run_script_description(_many(1000), mode="ask", tool_tokens=500)
    assert bare < counter.count(text) <= bare + 500 + 60  # the budget, the closing line
    shown = text.count("(*, id: str = ...)")
    assert 20 < shown < 1000
    assert f"... and {1000 - shown} more tools: tools() lists them all" in text
    everything = run_script_description(_many(30), mode="ask")
    assert everything.count("(*, id: str = ...)") == 30
    assert "more tools" not in everything


def test_the_tools_named_first_are_listed_first_and_grouped_by_module() -> None:
    text = run_script_description(
        _many(1000), mode="ask", first=["svc2__tool998", "svc1__tool7"], tool_tokens=60
    )
    listing = text[text.index("svc2:") :]
    assert listing.startswith("svc2:\n  tool998(*, id: str = ...)\n")
    assert listing.index("svc1:\n  tool7(*, id: str = ...)\n") < listing.index("svc0:")

"""The pre-flight check (docs/run_script.md, "Pre-flight check"): what it finds and where, what
it leaves to the run, the corpus of broken scripts over the reference servers, the scripts of
the examples and the docs, and its place in a run (before the approval, nothing runs, audited,
``scripts.preflight: false``)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import anyio
import pytest

from sagents.audit import SqliteAuditStore
from sagents.config._models import ScriptsParams
from sagents.core._limits import ScriptLimits
from sagents.core._spec import ToolSource, ToolSpec
from sagents.errors import ConfigError, PreflightError, SagentsError, ScriptRejectedError
from sagents.script._policy import ScriptPlan, plan_script
from sagents.script._preflight import check_script, preflight_findings
from sagents.script._values import ScriptRequest
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest
from tests.script.conftest import SPECS, FakeTools, RunnerFactory
from tests.script.preflight_reference import ROOT, corpus_scripts, reference_specs

pytestmark = pytest.mark.anyio

DEVICE = ToolSpec(
    name="fleet__configure",
    description="Configure a device.",
    input_schema={
        "type": "object",
        "properties": {
            "sn": {"type": "string"},
            "retries": {"type": "integer"},
            "ratio": {"type": "number"},
            "level": {"type": "string", "enum": ["low", "high"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "extra": {"type": "object", "properties": {"on": {"type": "boolean"}}},
            "free": {"$ref": "#/$defs/anything"},
        },
        "required": ["sn"],
        "additionalProperties": False,
    },
    permission="read_only",
    source=ToolSource(kind="mcp", server="fleet", original_name="configure"),
)


def _plan(tools: tuple[str, ...] = (), mode: str = "ask") -> ScriptPlan:
    return plan_script([*SPECS, DEVICE], tools, mode)  # type: ignore[arg-type]  # valid literal


def _problems(code: str, plan: ScriptPlan | None = None) -> list[tuple[int, str]]:
    findings = preflight_findings(textwrap.dedent(code), plan or _plan())
    return [(f.line, f.problem) for f in findings]


def test_an_unknown_tool_is_found_with_its_line_and_the_close_names() -> None:
    ((line, problem),) = _problems(
        """
        from agent_tools import call

        print(call("fleet__gett", {"sn": "A"}))
        """
    )
    assert line == 4
    assert "no tool 'fleet__gett' is available to this script" in problem
    assert "did you mean 'fleet__get'" in problem


def test_unlisted_write_destructive_and_long_task_only_tools_get_the_plans_reasons() -> None:
    code = """
        from agent_tools import call, call_many, call_raw
        call("fleet__set", {"sn": "A"})
        call_many("fleet__reboot", [{"sn": "A"}])
        call_raw("fleet__long", {})
        """
    found = _problems(code)
    assert [line for line, _ in found] == [3, 4, 5]
    assert "was not listed in run_script's 'tools'" in found[0][1]
    assert "is destructive and cannot be called from a script" in found[1][1]
    assert "is long-task-only" in found[2][1]
    assert _problems(code, _plan(("fleet__set",)))[0][0] == 4  # listed: callable


def test_a_write_tool_in_read_only_mode_is_not_available() -> None:
    ((_, problem),) = _problems(
        "from agent_tools import call\ncall('fleet__set', {'sn': 'A'})\n", _plan(mode="read_only")
    )
    assert "no tool 'fleet__set' is available" in problem


def test_literal_arguments_are_checked_against_the_input_schema() -> None:
    found = _problems(
        """
        from agent_tools import call
        call("fleet__configure", {"retries": 3})
        call("fleet__configure", {"sn": 1, "retries": "3", "ratio": "x"})
        call("fleet__configure", {"sn": "A", "level": "medium", "serial": "B"})
        call("fleet__configure", {"sn": "A", "tags": ["a", 2], "note": 5})
        call("fleet__configure", {"sn": "A", "extra": {"on": "yes"}})
        call("fleet__configure")
        """
    )
    problems = "\n".join(f"{line}: {problem}" for line, problem in found)
    assert "3: 'fleet__configure' is missing the required argument(s) 'sn'" in problems
    assert "4: 'fleet__configure' argument 'sn' must be of type string, not integer" in problems
    assert "argument 'retries' must be of type integer, not string" in problems
    assert "argument 'ratio' must be of type number, not string" in problems
    assert "5: 'fleet__configure' argument 'level' is 'medium', not one of 'low', 'high'" in (
        problems
    )
    assert "5: 'fleet__configure' has no argument 'serial'" in problems
    assert "6: 'fleet__configure' argument 'tags'[1] must be of type string, not integer" in (
        problems
    )
    assert "argument 'note' must be of type string or null, not integer" in problems
    assert "7: 'fleet__configure' argument 'extra' argument 'on' must be of type boolean" in (
        problems
    )
    assert "8: 'fleet__configure' is missing the required argument(s) 'sn'" in problems
    assert len(found) == 10


def test_a_call_many_list_is_checked_item_by_item_and_a_mistake_reported_once() -> None:
    found = _problems(
        """
        from agent_tools import call_many
        call_many("fleet__configure", [{"sn": "A"}, {"serial": "B"}])
        call_many("fleet__configure", [{"retries": n} for n in range(3)])
        call_many("fleet__configure", [{"sn": "A", "retries": "x"}, {"sn": "B", "retries": "x"}])
        call_many("fleet__configure", [{}] * 3)
        """
    )
    assert [line for line, _ in found] == [3, 3, 4, 5, 6]


def test_every_way_to_import_agent_tools_is_followed() -> None:
    code = """
        import agent_tools
        import agent_tools as at
        from agent_tools import call as c
        from agent_tools import *
        agent_tools.call("nope_1")
        at.call_raw("nope_2", {})
        c("nope_3")
        call_many("nope_4", [])
        """
    assert [line for line, _ in _problems(code)] == [6, 7, 8, 9]


def test_what_the_source_does_not_fix_is_left_to_the_run() -> None:
    assert not _problems(
        """
        from agent_tools import call, call_many
        name = "fleet__gett"
        args = {}
        call(name, {"sn": "A"})                        # a name built at run time
        call("fleet__configure", args)                 # arguments built at run time
        call("fleet__configure", {**args})             # unpacked
        call("fleet__configure", {"sn": sn_of()})      # a value built at run time
        call("fleet__configure", {"sn": "A", "free": 1})   # a schema without a plain type
        call("fleet__configure", {"sn": f"S{1}", "ratio": 2, "retries": 2.0})
        call_many("fleet__configure", rows)
        call(*parts)
        call("fleet__configure", {key: "A"})
        """
    )


def test_a_call_not_from_agent_tools_is_not_a_tool_call() -> None:
    assert not _problems(
        """
        def call(name, args=None):
            return name

        call("fleet__gett", {})
        """
    )
    assert not _problems("import requests\nrequests.call('x')\n")


def test_a_script_that_does_not_parse_is_left_to_the_run() -> None:
    assert not _problems("from agent_tools import call\ncall('nope', {\n")


def test_check_script_raises_one_error_listing_every_finding() -> None:
    code = "from agent_tools import call\ncall('nope', {})\ncall('fleet__set', {'sn': 'A'})\n"
    with pytest.raises(PreflightError) as caught:
        check_script(code, _plan())
    error = caught.value
    assert isinstance(error, ScriptRejectedError)
    assert error.code == "preflight_failed"
    assert "line 2: no tool 'nope'" in error.message
    assert "line 3: write tool 'fleet__set' was not listed" in error.message
    assert [f["line"] for f in error.details["findings"]] == [2, 3]
    rebuilt = SagentsError.from_dict(error.to_dict())
    assert type(rebuilt) is PreflightError
    check_script("from agent_tools import call\ncall('fleet__get', {'sn': 'A'})\n", _plan())


async def test_the_corpus_of_broken_scripts_is_caught_line_by_line(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        specs = await reference_specs(tmp_path)
    scripts = corpus_scripts()
    assert len(scripts) >= 40
    for script in scripts:
        plan = plan_script(specs, script.tools, script.mode)
        lines = {finding.line for finding in preflight_findings(script.code, plan)}
        assert script.mistakes, script.name
        assert lines == script.mistakes, script.name


def _published_scripts() -> list[tuple[str, str]]:
    """Every script of ``examples/`` and the demo, and every python block of the docs and the
    README, that uses ``agent_tools``."""
    found = []
    files = [*ROOT.glob("examples/**/*.py"), *(ROOT / "sagents" / "demo").glob("**/*.py")]
    for path in sorted(files):
        code = path.read_text()
        if "agent_tools" in code:
            found.append((str(path.relative_to(ROOT)), code))
    for path in sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"]):
        for index, block in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S)):
            if "agent_tools" in block:
                found.append((f"{path.relative_to(ROOT)} block {index}", block))
    return found


async def test_the_scripts_of_the_examples_and_the_docs_pass_the_preflight(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        specs = await reference_specs(tmp_path)
    writes = [spec.name for spec in specs if spec.permission == "write"]
    scripts = _published_scripts()
    assert len(scripts) >= 4
    for name, code in scripts:
        assert preflight_findings(code, plan_script(specs, writes, "auto")) == [], name


class _Counting:
    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return "allow_once"


BROKEN = "from agent_tools import call\ncall('fleet__get', {'sn': 'A'})\ncall('fleet__gett', {})\n"


async def test_a_failed_preflight_runs_nothing_asks_nothing_and_is_audited(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path, tmp_path: Path
) -> None:
    approver = _Counting()
    store = SqliteAuditStore(path=tmp_path / "audit.sqlite3")
    runner = make_runner(mode="ask", approver=approver, audit=store, session_id="s1")
    request = ScriptRequest(code=BROKEN, tools=("fleet__set",), description="check")
    with anyio.fail_after(60):
        result = await runner.run(request)
    assert result.status == "rejected"
    assert result.error_code == "preflight_failed"
    assert "line 3: no tool 'fleet__gett'" in result.output
    assert "did you mean 'fleet__get'" in result.output
    assert result.to_dict()["error_code"] == "preflight_failed"
    assert approver.requests == []
    assert tools.calls == []
    assert result.records_dir is None
    assert not (workspace / ".agent").exists()
    (entry,) = await store.entries()
    assert (entry.tool, entry.status, entry.session_id) == ("run_script", "rejected", "s1")
    assert entry.data["script"] == BROKEN


async def test_with_the_preflight_off_the_mistake_is_found_at_run_time(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    runner = make_runner(limits=ScriptLimits(timeout_s=60.0, preflight=False))
    with anyio.fail_after(60):
        result = await runner.run(ScriptRequest(code=BROKEN, description="check"))
    assert result.status == "error"
    assert result.error_code is None
    assert "unknown_tool" in result.output
    assert tools.calls == [("fleet__get", {"sn": "A"})]  # the first call ran


def test_the_config_switch_turns_the_preflight_off_and_refuses_a_non_boolean() -> None:
    assert ScriptsParams.parse({}).to_limits().preflight is True
    assert ScriptsParams.parse({"preflight": False}).to_limits().preflight is False
    for wrong in ("no", 0, None):
        with pytest.raises(ConfigError) as caught:
            ScriptsParams.parse({"preflight": wrong}, file="cfg.json")
        assert caught.value.details["key"] == "scripts.preflight"

"""Typed stubs from hostile upstream definitions (docs/run_script.md, "Typed stubs"): an
upstream chooses tool names, descriptions, property names, enum values and whole schemas; the
generated module must stay valid Python whose docstrings are the upstream's text and nothing
more, and generation must stay bounded in time and size whatever the schema."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.core._limits import ScriptLimits
from sagents.core._spec import ToolSource, ToolSpec
from sagents.script import _stubs
from sagents.script._description import run_script_description
from sagents.script._launcher import PlainLauncher
from sagents.script._runner import ScriptRunner
from sagents.script._runtime import ScriptRuntime
from sagents.script._stubs import stub_catalog
from sagents.script._values import ScriptRequest
from sagents.tool._approval import AllowAllApprover
from tests.script.conftest import FakeTools

pytestmark = pytest.mark.anyio

# Each would end the docstring, break the source or run code if it reached the module as is.
HOSTILE_TEXTS = [
    '"""\nimport os\nPWNED = True\n"""',
    '""""',
    'ends in a quote"',
    "ends in a backslash\\",
    '\\"""\nPWNED = True\n#',
    "null \x00 byte",
    "lone surrogate \ud800 here",
    "line\u2028separator\u2029and\x85next\x0bvertical\x0cfeed\rreturn",
    "escape \x1b[31m and bell \x07",
    "\\N{BULLET} \\x41 \\u0041 {braces} %s",
]


def _spec(name: str, description: str, schema: dict[str, Any] | None = None) -> ToolSpec:
    return ToolSpec(
        name=f"evil__{name}",
        description=description,
        input_schema=schema or {"type": "object", "properties": {"sn": {"type": "string"}}},
        permission="read_only",
        source=ToolSource(kind="mcp", server="evil", original_name=name),
    )


def _load(source: str) -> dict[str, Any]:
    """Run a generated module with a recording ``agent_tools`` in place: its namespace."""
    calls: list[tuple[str, dict[str, Any]]] = []
    namespace: dict[str, Any] = {"__name__": "agent_tools.stubs.evil", "_recorded": calls}
    code = compile(source, "stubs.evil.py", "exec", dont_inherit=True)
    fake = type(textwrap)("agent_tools")

    def call(tool: str, args: dict[str, Any]) -> str:
        calls.append((tool, args))
        return "called"

    fake.call = call  # type: ignore[attr-defined]
    import sys

    saved = sys.modules.get("agent_tools")
    sys.modules["agent_tools"] = fake
    try:
        exec(code, namespace)
    finally:
        if saved is None:
            del sys.modules["agent_tools"]
        else:
            sys.modules["agent_tools"] = saved
    return namespace


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_a_hostile_description_stays_the_docstring_of_a_valid_module(text: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": [text, "b"], "description": text, "default": text},
            text: {"type": "string", "pattern": text},
        },
        "required": [text],
    }
    source = stub_catalog([_spec("t", text, schema)]).source("evil") or ""
    namespace = _load(source)
    assert "PWNED" not in namespace
    function = namespace["t"]
    wanted = [line.strip() for line in text.strip().splitlines()]
    assert [line.strip() for line in function.__doc__.splitlines()][: len(wanted)] == wanted
    code = function.__code__
    names = code.co_varnames[: code.co_kwonlyargcount]
    assert function(**dict.fromkeys(names, "v")) == "called"
    assert namespace["_recorded"] == [("evil__t", {text: "v", "mode": "v"})]


def test_a_hostile_tool_name_is_an_identifier_and_sent_as_is() -> None:
    names = ["class", "call", "_call", "_OMITTED", "TYPE_CHECKING", "__all__", "a-b", "a_b", "2fa"]
    names += ["x'); import os; ('", "\u2028", "é", "x" * 5000]
    source = stub_catalog([_spec(name, "d") for name in names]).source("evil") or ""
    namespace = _load(source)
    sent = []
    for function in namespace["__all__"]:
        namespace[function](sn="1")
        sent.append(namespace["_recorded"][-1][0])
    assert sorted(sent) == sorted(f"evil__{name}" for name in names)
    assert namespace["_OMITTED"] is not None
    assert callable(namespace["_call"])


def _fanout_schema(levels: int, width: int, *, union: bool) -> dict[str, Any]:
    """A schema of a few kilobytes whose naive expansion has ``width ** levels`` nodes."""
    defs: dict[str, Any] = {}
    for level in range(levels):
        target = {"$ref": f"#/$defs/d{level + 1}"}
        defs[f"d{level}"] = (
            {"anyOf": [target] * width}
            if union
            else {"type": "object", "properties": {f"p{i}": target for i in range(width)}}
        )
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


class _Budget(Exception):
    pass


@pytest.mark.parametrize("union", [True, False], ids=["anyOf", "properties"])
def test_a_schema_that_fans_out_is_typed_with_bounded_work(
    monkeypatch: pytest.MonkeyPatch, union: bool
) -> None:
    visits = 0
    visit = _stubs._Typer._type

    def counted(self: Any, schema: Any, name: str, depth: int) -> Any:
        nonlocal visits
        visits += 1
        if visits > 200_000:  # naively: 300 ** 3 (anyOf) or 20 ** 4 (properties)
            raise _Budget
        return visit(self, schema, name, depth)

    monkeypatch.setattr(_stubs._Typer, "_type", counted)
    schema = _fanout_schema(3, 300, union=True) if union else _fanout_schema(4, 20, union=False)
    catalog = stub_catalog([_spec("t", "fans out", schema)])
    source = catalog.source("evil") or ""
    signature = catalog.signature("evil", "t")
    assert len(source) < 200_000
    assert len(signature) < 2_000
    assert "def t(*, x:" in source
    _load(source)


def test_one_oversized_signature_does_not_hide_the_tools_after_it() -> None:
    huge = {
        "type": "object",
        "properties": {f"p{i}": {"enum": [f"v{j}" for j in range(50)]} for i in range(2000)},
    }
    specs = [_spec("huge", "big", huge), _spec("small", "small")]
    description = run_script_description(specs, mode="auto")
    assert "small(*, sn: str = ...)" in description
    assert len(description) < 20_000


def test_a_registry_of_5000_tools_stays_within_the_token_budget() -> None:
    from sagents.core._tokens import default_token_counter
    from sagents.script._description import DEFAULT_TOOL_TOKENS

    specs = [_spec(f"tool_{i}", f"Tool {i}.") for i in range(5000)]
    full = run_script_description(specs, mode="auto")
    head = run_script_description(specs[:1], mode="auto")
    counter = default_token_counter()
    assert counter.count(full) - counter.count(head) <= DEFAULT_TOOL_TOKENS + 60
    assert "more tools" in full


def _runner(
    specs: list[ToolSpec], tools: FakeTools, workspace: Path, runtime: ScriptRuntime
) -> ScriptRunner:
    return ScriptRunner(
        specs=specs,
        call_tool=tools,
        workspace=workspace,
        runtime=runtime,
        mode="auto",
        approver=AllowAllApprover(),
        limits=ScriptLimits(timeout_s=60.0, preflight=False),  # the run itself is the subject
        launcher=PlainLauncher(),
    )


async def test_hostile_stubs_import_in_a_real_script_without_running_upstream_code(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    specs = [
        _spec(f"t{index}", text, {"type": "object", "properties": {text: {"enum": [text]}}})
        for index, text in enumerate(HOSTILE_TEXTS)
    ]
    tools = FakeTools()
    runner = _runner(specs, tools, workspace, runtime)
    code = """
        from agent_tools.stubs import evil
        print("PWNED" in vars(evil), len(evil.__all__))
        print(evil.t5.__doc__.split("\\n")[0] == "null \\x00 byte")
        evil.t0()
    """
    with anyio.fail_after(60):
        result = await runner.run(
            ScriptRequest(code=textwrap.dedent(code), tools=(), description="hostile")
        )
    assert result.status == "ok", result.output
    assert result.output.splitlines()[1:3] == ["False 10", "True"]
    assert tools.calls == [("evil__t0", {})]


async def test_an_unknown_stubs_module_of_a_huge_name_is_answered_briefly(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    runner = _runner([_spec("t", "d")], FakeTools(), workspace, runtime)
    code = """
        import importlib
        for name in ["x" * 1_000_000, "__init__", "evil2"] * 300:
            try:
                importlib.import_module("agent_tools.stubs." + name)
            except ImportError as error:
                message = str(error)
        print(len(message) < 500, "evil" in message)
        try:
            importlib.import_module("agent_tools.stubs." + "y" * 1_000_000)
        except ImportError as error:
            print(len(str(error)) < 3_000)
    """
    with anyio.fail_after(120):
        result = await runner.run(
            ScriptRequest(code=textwrap.dedent(code), tools=(), description="names")
        )
    assert result.status == "ok", result.output
    assert result.output.splitlines()[1:] == ["True True", "True"]


def test_a_name_that_is_already_an_identifier_keeps_it_whatever_comes_before_it() -> None:
    schema = {
        "type": "object",
        "properties": {"a-b": {"type": "string"}, "a_b": {"type": "integer"}},
    }
    specs = [_spec("get-status", "mapped"), _spec("get_status", "exact", schema)]
    catalog = stub_catalog(specs)
    assert catalog.modules["evil"] == {
        "get_status_2": "evil__get-status",
        "get_status": "evil__get_status",
    }
    assert catalog.arguments("evil", "get_status") == (
        "evil__get_status",
        {"a_b_2": "a-b", "a_b": "a_b"},
        False,
    )
    namespace = _load(catalog.source("evil") or "")
    namespace["get_status"](a_b=1)
    assert namespace["_recorded"] == [("evil__get_status", {"a_b": 1})]


def test_the_preflight_maps_a_stub_call_once_per_function(monkeypatch: pytest.MonkeyPatch) -> None:
    from sagents.script._policy import plan_script
    from sagents.script._preflight import preflight_findings

    shapes = 0
    shape = _stubs._ModuleWriter._shape

    def counted(self: Any, function: str, spec: ToolSpec) -> Any:
        nonlocal shapes
        shapes += 1
        return shape(self, function, spec)

    monkeypatch.setattr(_stubs._ModuleWriter, "_shape", counted)
    plan = plan_script([_spec("t", "d")], [], "auto")
    code = "from agent_tools.stubs import evil\n" + 'evil.t(sn="1")\n' * 5000
    assert preflight_findings(code, plan) == []
    assert shapes <= 2

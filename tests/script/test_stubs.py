"""Typed stubs (docs/run_script.md, "Typed stubs"): the generated modules, and
``from agent_tools.stubs import fleet`` in a real script."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.core._spec import ToolSource, ToolSpec
from sagents.script._stubs import python_identifier, stub_catalog
from sagents.script._values import ScriptRequest, ScriptRunResult
from tests.script.conftest import RUN_TIME_ONLY, FakeTools, RunnerFactory, read_calls

pytestmark = pytest.mark.anyio


async def _run(
    make_runner: RunnerFactory, code: str, tools: tuple[str, ...] = (), *, preflight: bool = True
) -> ScriptRunResult:
    runner = make_runner(limits=None if preflight else RUN_TIME_ONLY)
    with anyio.fail_after(60):
        return await runner.run(
            ScriptRequest(code=textwrap.dedent(code), tools=tools, description="stubs")
        )


async def test_a_stub_call_is_a_call_of_the_tool_with_its_arguments(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools.stubs import fleet
        print(fleet.get(sn="A1")["sn"])
        print(fleet.text(sn="B2"))
        print(fleet.get())
        """,
    )
    assert result.status == "ok", result.output
    assert result.output.splitlines()[1:] == [
        "A1",
        "plain B2",
        "{'sn': None, 'tool': 'fleet__get'}",
    ]
    assert tools.calls == [
        ("fleet__get", {"sn": "A1"}),
        ("fleet__text", {"sn": "B2"}),
        ("fleet__get", {}),
    ]
    assert [line["tool"] for line in read_calls(workspace, result.records_dir or "")] == [
        "fleet__get",
        "fleet__text",
        "fleet__get",
    ]


async def test_an_unlisted_write_tool_is_stubbed_and_raises_the_tool_error_of_call(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import ToolError
        from agent_tools.stubs import fleet
        try:
            fleet.set(sn="A1")
        except ToolError as error:
            print(error.code, error.message)
        print(hasattr(fleet, "reboot"), hasattr(fleet, "long"), hasattr(fleet, "off"))
        """,
        preflight=False,  # the run-time refusal: the pre-flight refuses it first
    )
    assert result.status == "ok", result.output
    code, message = result.output.splitlines()[1].split(" ", 1)
    assert code == "not_allowed"
    assert "was not listed in run_script's 'tools'" in message
    assert result.output.splitlines()[2] == "False False False"
    assert tools.calls == []


async def test_a_listed_write_tool_is_called_through_its_stub(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    result = await _run(
        make_runner,
        "from agent_tools.stubs import fleet\nfleet.set(sn='A1')\n",
        tools=("fleet__set",),
    )
    assert result.status == "ok", result.output
    assert tools.calls == [("fleet__set", {"sn": "A1"})]


async def test_an_unknown_stubs_module_is_an_import_error_naming_the_modules(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        try:
            from agent_tools.stubs import flet
        except ImportError as error:
            print(error.name, "|", error)
        import agent_tools.stubs.fleet as f
        print(f.__name__, sorted(f.__all__))
        """,
        preflight=False,  # the run-time refusal: the pre-flight refuses it first
    )
    assert result.status == "ok", result.output
    first, second = result.output.splitlines()[1:]
    assert first.startswith("agent_tools.stubs.flet | ")
    assert "there are: fleet" in first
    assert second == "agent_tools.stubs.fleet ['fail', 'get', 'set', 'text']"


async def test_a_failing_stub_call_shows_the_script_line_not_the_stub_frames(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(make_runner, "from agent_tools.stubs import fleet\nfleet.fail(sn='X')\n")
    assert result.status == "error"
    assert 'script.py", line 2' in result.output
    assert "stubs.fleet.py" not in result.output
    assert "agent_tools.ToolError: fleet__fail: [tool_error] device X is offline" in result.output


async def test_help_on_a_stub_shows_its_description_as_the_description_tells_the_model(
    make_runner: RunnerFactory,
) -> None:
    """run_script's description says ``help(fleet.get_device_status)`` describes a tool; the
    script runs without ``site`` (``-S``), which is where ``help`` usually comes from."""
    result = await _run(
        make_runner,
        "from agent_tools.stubs import fleet\nhelp(fleet.get)\nhelp(fleet)\n",
    )
    assert result.status == "ok", result.output
    assert "Help on function get in module agent_tools.stubs.fleet" in result.output
    assert "Help on module agent_tools.stubs.fleet" in result.output


def _spec(name: str, schema: dict[str, Any], output: dict[str, Any] | None = None) -> ToolSpec:
    return ToolSpec(
        name=f"my-server__{name}",
        description=f"The {name} tool.",
        input_schema=schema,
        output_schema=output,
        permission="read_only",
        source=ToolSource(kind="mcp", server="my-server", original_name=name),
    )


def _load(source: str) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """Execute a stubs module with a recording ``agent_tools.call``."""
    sent: list[tuple[str, dict[str, Any]]] = []
    fake = type(textwrap)("agent_tools")

    def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        sent.append((tool, args))
        return {}

    fake.call = call  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {"__name__": "agent_tools.stubs.x"}
    import sys

    saved = sys.modules.get("agent_tools")
    sys.modules["agent_tools"] = fake
    try:
        exec(compile(source, "stubs", "exec"), namespace)
    finally:
        if saved is None:
            del sys.modules["agent_tools"]
        else:
            sys.modules["agent_tools"] = saved
    return namespace, sent


def test_names_that_are_not_identifiers_are_mapped_and_the_original_names_are_sent() -> None:
    schema = {
        "type": "object",
        "properties": {"repo-path": {"type": "string"}, "class": {"type": "integer"}, "2fa": {}},
        "required": ["repo-path"],
    }
    catalog = stub_catalog([_spec("get-status", schema), _spec("get_status", {"type": "object"})])
    assert list(catalog.modules) == ["my_server"]
    assert catalog.modules["my_server"] == {  # an identifier keeps its name: get_status
        "get_status_2": "my-server__get-status",
        "get_status": "my-server__get_status",
    }
    source = catalog.source("my_server")
    assert source is not None
    namespace, sent = _load(source)
    namespace["get_status_2"](repo_path="/r", class_=3, n_2fa=[1])
    namespace["get_status_2"](repo_path="/s")
    namespace["get_status"]()
    assert sent == [
        ("my-server__get-status", {"repo-path": "/r", "class": 3, "2fa": [1]}),
        ("my-server__get-status", {"repo-path": "/s"}),
        ("my-server__get_status", {}),
    ]
    with pytest.raises(TypeError, match="repo_path"):
        namespace["get_status_2"]()


@pytest.mark.parametrize(
    ("schema", "annotation", "quoted"),
    [
        ({"type": "string", "pattern": "^a"}, "str", '"pattern":"^a"'),
        ({"type": "array", "items": {"type": "integer"}}, "list[int]", None),
        ({"enum": ["a", "b", None]}, "Literal['a', 'b'] | None", None),
        ({"type": ["string", "null"]}, "str | None", None),
        (
            {"anyOf": [{"type": "object", "properties": {"a": {}}}, {"type": "string"}]},
            "Any",
            '"anyOf"',
        ),
        (
            {"oneOf": [{"type": "object", "properties": {"a": {}}}, {"type": "object"}]},
            "dict[str, Any]",
            '"oneOf"',
        ),
        ({"type": "object", "additionalProperties": {"type": "number"}}, "dict[str, float]", None),
        ({"allOf": [{"type": "string"}]}, "Any", '"allOf"'),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, "Any", '"prefixItems"'),
    ],
)
def test_schemas_typing_cannot_express_fall_back_with_the_schema_in_the_docstring(
    schema: dict[str, Any], annotation: str, quoted: str | None
) -> None:
    spec = _spec("t", {"type": "object", "properties": {"x": schema}, "required": ["x"]})
    catalog = stub_catalog([spec])
    signature = catalog.signatures("my_server")[0][1]
    assert signature == f"t(*, x: {annotation})"
    source = catalog.source("my_server") or ""
    namespace, _ = _load(source)
    doc = namespace["t"].__doc__
    if quoted is None:
        assert "Schema:" not in doc
    else:
        assert quoted in doc


def test_objects_become_typed_dicts_with_optional_keys_and_a_typed_result() -> None:
    output = {
        "type": "object",
        "properties": {"rows": {"type": "array", "items": {"$ref": "#/$defs/Row"}}},
        "required": ["rows"],
        "$defs": {
            "Row": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "note-x": {"type": "string"}},
                "required": ["id"],
            }
        },
    }
    catalog = stub_catalog([_spec("list", {"type": "object", "properties": {}}, output)])
    source = catalog.source("my_server") or ""
    assert "\nTYPE_CHECKING = False\n" in source  # typing is not imported at run time
    namespace, _ = _load(source.replace("\nTYPE_CHECKING = False\n", "\nTYPE_CHECKING = True\n"))
    row = namespace["ListResultRowsItem"]
    assert row.__required_keys__ == frozenset({"id"})
    assert row.__optional_keys__ == frozenset({"note-x"})
    assert namespace["ListResult"].__required_keys__ == frozenset({"rows"})
    assert catalog.signatures("my_server") == [
        ("my-server__list", "list() -> {rows: list[{id: int, 'note-x'?: str}]}")
    ]


def test_python_identifier_is_public_unique_and_never_a_keyword() -> None:
    assert python_identifier("a-b") == "a_b"
    assert python_identifier("_x") == "x"
    assert python_identifier("9lives") == "n_9lives"
    assert python_identifier("match") == "match_"
    assert python_identifier("a", {"a", "a_2"}) == "a_3"
    assert python_identifier("") == "n_"


def _corpus_specs() -> list[tuple[ToolSpec, list[Any]]]:
    from tests.tool.test_export_corpus import HARD_CASES

    return [(_spec(name, schema), accepted) for name, schema, accepted, _ in HARD_CASES]


def _check_round_trip(specs: list[tuple[ToolSpec, list[Any]]]) -> None:
    """Each stub module compiles and runs; calling a stub with an accepted sample's values
    (by their Python names) sends exactly that sample to its tool."""
    catalog = stub_catalog([spec for spec, _ in specs])
    samples = {spec.name: accepted for spec, accepted in specs}
    checked = 0
    for module, functions in catalog.modules.items():
        namespace, sent = _load(catalog.source(module) or "")
        for function, tool in functions.items():
            found = catalog.arguments(module, function)
            assert found is not None
            _, names, extra = found
            keys = {key: name for name, key in names.items()}
            for sample in samples[tool]:
                if not isinstance(sample, dict):
                    continue
                named = {keys[k]: v for k, v in sample.items() if k in keys}
                rest = {k: v for k, v in sample.items() if k not in keys}
                if rest and not extra:
                    continue  # not a sample of this root object's properties
                sent.clear()
                namespace[function](**named, **rest)
                assert sent == [(tool, sample)], (tool, sample)
                checked += 1
    assert checked > 0


def test_every_schema_of_the_export_corpus_gets_a_stub_that_sends_its_samples() -> None:
    _check_round_trip(_corpus_specs())


async def test_every_tool_of_the_reference_servers_gets_a_stub(tmp_path: Path) -> None:
    from tests.script.preflight_reference import reference_specs

    with anyio.fail_after(120):
        specs = await reference_specs(tmp_path)
    stubbed = [spec for spec in specs if spec.permission in ("read_only", "write")]
    catalog = stub_catalog(specs)
    assert sorted(catalog.modules) == ["fleet", "git", "memory", "todo"]
    assert sorted(t for f in catalog.modules.values() for t in f.values()) == sorted(
        spec.name for spec in stubbed
    )
    _check_round_trip([(spec, [_example(spec.input_schema)]) for spec in stubbed])


def _example(schema: Any) -> Any:
    """A value of ``schema`` (every property of an object, the first enum value)."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return _example(schema[union][0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        return {key: _example(sub) for key, sub in schema.get("properties", {}).items()}
    return {"string": "s", "integer": 1, "number": 1.5, "boolean": True, "array": []}.get(str(kind))


def test_the_generated_modules_pass_mypy_strict(tmp_path: Path) -> None:
    from mypy import api

    (tmp_path / "agent_tools").mkdir()
    (tmp_path / "agent_tools" / "__init__.pyi").write_text(
        "from typing import Any\n"
        "def call(tool: str, args: dict[str, Any] | None = None) -> Any: ...\n"
    )
    catalog = stub_catalog([spec for spec, _ in _corpus_specs()])
    files = []
    for module in catalog.modules:
        path = tmp_path / f"{module}.py"
        path.write_text(catalog.source(module) or "")
        files.append(str(path))
    out, err, status = api.run(
        ["--strict", "--no-incremental", "--python-version", "3.11", "--config-file", "", *files]
    )
    assert status == 0, out + err


def _fleet_plan() -> Any:
    from sagents.script._policy import plan_script

    def spec(name: str, permission: str, schema: dict[str, Any]) -> ToolSpec:
        return ToolSpec(
            name=f"fleet__{name}",
            description=name,
            input_schema=schema,
            permission=permission,  # type: ignore[arg-type]  # valid literals
            source=ToolSource(kind="mcp", server="fleet", original_name=name),
        )

    sn = {"type": "object", "properties": {"sn": {"type": "string"}}, "required": ["sn"]}
    config = {
        "type": "object",
        "properties": {"sn": {"type": "string"}, "key-name": {"type": "string"}},
        "required": ["sn", "key-name"],
        "additionalProperties": False,
    }
    specs = [
        spec("get_device_status", "read_only", sn),
        spec("set_device_config", "write", config),
        spec("reboot_device", "destructive", sn),
    ]
    return plan_script(specs, [], "auto")


def test_the_preflight_checks_stub_calls_like_calls() -> None:
    from sagents.script._preflight import preflight_findings

    code = textwrap.dedent(
        """\
        from agent_tools.stubs import fleet
        from agent_tools.stubs import flet
        from agent_tools.stubs.fleet import get_device_status as status
        import agent_tools.stubs.fleet as f
        fleet.get_device_status(sn="SN1")
        fleet.get_devices_status(sn="SN1")
        fleet.get_device_status()
        status(sn=5)
        f.get_device_status(serial="SN1")
        fleet.set_device_config(sn="SN1", key_name="x")
        fleet.reboot_device(sn="SN1")
        fleet.get_device_status(**{"sn": "SN1"})
        """
    )
    found = [(f.line, f.problem) for f in preflight_findings(code, _fleet_plan())]
    assert found == [
        (2, "no stubs module 'flet' in this run; did you mean 'fleet'?"),
        (
            6,
            "no function 'get_devices_status' in agent_tools.stubs.fleet; did you mean "
            "'get_device_status'?",
        ),
        (7, "'fleet__get_device_status' is missing the required argument(s) 'sn'"),
        (8, "'fleet__get_device_status' argument 'sn' must be of type string, not integer"),
        (9, "fleet.get_device_status() has no argument 'serial'"),
        (
            10,
            "write tool 'fleet__set_device_config' was not listed in run_script's 'tools'; "
            "list it there to call it from the script",
        ),
        (
            11,
            "tool 'fleet__reboot_device' is destructive and cannot be called from a script; "
            "call 'fleet__reboot_device' directly instead (each call is approved on its own)",
        ),
    ]


def test_a_correct_stub_script_has_no_findings() -> None:
    from sagents.script._policy import plan_script
    from sagents.script._preflight import preflight_findings

    plan = _fleet_plan()
    listed = plan_script(list(plan.offered), ["fleet__set_device_config"], "auto")
    code = textwrap.dedent(
        """\
        from agent_tools.stubs import fleet
        for sn in ("SN1", "SN2"):
            if not fleet.get_device_status(sn=sn):
                fleet.set_device_config(sn=sn, key_name="mode")
        """
    )
    assert preflight_findings(code, listed) == []


async def test_a_script_with_a_broken_stub_call_is_refused_before_it_runs(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools.stubs import fleet
        fleet.get(sn="A1")
        fleet.gett(sn="A1")
        """,
    )
    assert result.status == "rejected"
    assert result.error_code == "preflight_failed"
    assert "line 4: no function 'gett' in agent_tools.stubs.fleet; did you mean 'get'" in (
        result.output
    )
    assert tools.calls == []

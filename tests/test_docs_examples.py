"""The examples of ``docs/*.md`` stay true, as tests/test_readme.py keeps the README's
(tests/test_api_reference.py checks the dotted ``sagents.`` names and the imports the prose
cites).

What is checked, block by block (a fenced block, indented ones inside lists included):

- ```` ```python ````: it compiles (a top-level ``await``, ``async with`` or ``async for`` is
  allowed: such a block is the body of the coroutine a reader runs with ``asyncio.run``); every
  name it imports from ``sagents`` exists, and so does every name it imports from the script
  helper ``agent_tools`` (``sagents/script/_guest/agent_tools.py``); every keyword argument of a
  call of a ``sagents`` class or function imported in the same document is one of its
  parameters, and so is every keyword argument of a method called on an instance the document
  made of such a class (``agent = SAgent(...)``, then ``agent.run(..., approvals="defer")``),
  which must exist.
- The *self-contained* Python blocks run: those that use no name they do not define or import
  (the rule is checked by ``symtable``; a block with such a name is a fragment of a larger
  program, its names explained in the prose around it), other than the scripts for run_script
  (they import ``agent_tools``, which exists only in a script's sandbox;
  tests/script/test_preflight.py checks their tool calls against the fleet's). They run in one
  subprocess from the repository root, each in a fresh namespace, and must not raise. A
  self-contained block that cannot run here is marked on the line before its fence with
  ``<!-- not run: REASON -->``: the few that need what the test machine lacks (the network, an
  optional exporter), that would write outside a temporary directory, or that start an MCP
  server (seconds, which the README's test pays already). A mark on a block that would not run
  anyway fails, and there are at most four.
- ```` ```json ````: it is JSON, or a JSON fragment of keys (``"hooks": {...}``), or it elides
  with ``...``. One whose top-level keys include a key of sagents' configuration loads through
  the real loader (``parse_config``, and the gateway's ``load_profiles``) with no warning, each
  ``${VAR}`` it names set; lines of event objects (``{"type": ...}``) load through
  ``event_from_dict``.
- docs/skills.md's ``SKILL.md`` (```` ```markdown ````) and ``skill.yaml`` (```` ```yaml ````)
  load through the skill parser as the text around them says.
- ``sagents ...`` command lines, in blocks and in inline code: the subcommand exists and so
  does every ``--option`` the line gives it.
- Calls in inline code of the prose (``SAgent(max_history_tokens=N)``, the field list
  ``ToolCall(id, name, arguments, item_id)``) of a public sagents name: each keyword, and each
  listed field of a keyword-only type, is one of its parameters.

Cost: about 4 s for the module on the 2-core machine, most of it importing the CLI, config
and gateway modules; the one subprocess that runs the self-contained blocks takes under a
second (``pytest tests/test_docs_examples.py --durations=5``).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import json
import logging
import os
import re
import subprocess
import symtable
import sys
import textwrap
import warnings
from dataclasses import dataclass
from inspect import Parameter
from pathlib import Path
from typing import Any

import pytest

from sagents.cli.main import LAZY_COMMANDS, load_command
from sagents.config import parse_config
from sagents.config._models import ConfigFileParams
from sagents.core.events import event_from_dict
from sagents.gateway import load_profiles
from sagents.skill import parse_skill_dir

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
GUEST_HELPER = ROOT / "sagents" / "script" / "_guest" / "agent_tools.py"
NOT_RUN = re.compile(r"^\s*<!-- not run: (?P<reason>.+?) -->\s*$")
POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD = Parameter.POSITIONAL_ONLY, Parameter.POSITIONAL_OR_KEYWORD
VAR_POSITIONAL = Parameter.VAR_POSITIONAL
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>\S*)\s*$")


@dataclass(frozen=True, kw_only=True)
class Block:
    path: Path
    line: int  # of the block's first line
    lang: str
    text: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        mark = NOT_RUN.match(lines[index - 1]) if index else None
        found.append(
            Block(
                path=path,
                line=index + 2,
                lang=opening["lang"],
                text=textwrap.dedent("\n".join(lines[index + 1 : end])) + "\n",
                not_run=mark["reason"] if mark else None,
            )
        )
        index = end + 1
    return found


BLOCKS = [block for path in DOCS for block in _blocks(path)]
PYTHON = [block for block in BLOCKS if block.lang == "python"]
JSON = [block for block in BLOCKS if block.lang == "json"]


def _tree(block: Block) -> ast.Module:
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree: ast.Module = compile(block.text, block.where, "exec", flags=flags, dont_inherit=True)
    return tree


def _guest_names() -> set[str]:
    """The public names of the script helper (it runs only inside a script's sandbox)."""
    for node in ast.parse(GUEST_HELPER.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{GUEST_HELPER} has no __all__")


def _imported(block: Block) -> dict[str, Any]:
    """The names the block imports from sagents, bound to their objects."""
    bound: dict[str, Any] = {}
    for node in ast.walk(_tree(block)):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if node.module.split(".")[0] == "agent_tools":
            if node.module == "agent_tools":
                missing = {alias.name for alias in node.names} - _guest_names()
                assert not missing, f"{block.where}: agent_tools has no {sorted(missing)}"
            else:  # the stubs modules are generated per run
                assert node.module.startswith("agent_tools.stubs"), block.where
            continue
        if node.module.split(".")[0] != "sagents":
            continue
        module = importlib.import_module(node.module)
        for alias in node.names:
            assert hasattr(module, alias.name), f"{block.where}: {node.module} has no {alias.name}"
            bound[alias.asname or alias.name] = getattr(module, alias.name)
    return bound


@pytest.mark.parametrize("block", PYTHON, ids=lambda block: block.where)
def test_a_python_example_compiles_and_imports_what_exists(block: Block) -> None:
    _imported(block)


def _instances(block: Block, names: dict[str, Any]) -> dict[str, type]:
    """The block's names bound to an instance of an imported sagents class:
    ``tm = ToolManager()``, ``async with ToolManager() as tm``."""
    found: dict[str, type] = {}
    for node in ast.walk(_tree(block)):
        targets: list[ast.expr | None]
        if isinstance(node, ast.Assign | ast.AnnAssign):
            value = node.value
            targets = [*node.targets] if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.withitem):
            value, targets = node.context_expr, [node.optional_vars]
        else:
            continue
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            continue
        cls = names.get(value.func.id)
        if inspect.isclass(cls):
            found.update({target.id: cls for target in targets if isinstance(target, ast.Name)})
    return found


def _call_errors(block: Block, names: dict[str, Any], instances: dict[str, type]) -> list[str]:
    """A call of an imported sagents callable, or of a method of an instance of an imported
    class, with a name or keyword argument that does not exist."""
    errors = []
    for node in ast.walk(_tree(block)):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id in names:
            label, target = f"{node.func.id}()", names[node.func.id]
        elif (
            isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in instances
        ):
            cls = instances[node.func.value.id]
            label = f"{cls.__name__}.{node.func.attr}()"
            target = getattr(cls, node.func.attr, None)
            if target is None:
                errors.append(f"{block.where}: {cls.__name__} has no {node.func.attr!r}")
                continue
        else:
            continue
        errors += [f"{block.where}: {label} takes no {name!r}" for name in _unknown(node, target)]
    return errors


def _unknown(call: ast.Call, target: Any) -> list[str]:
    """The keyword arguments of ``call`` that ``target`` has no parameter for; and when
    ``call`` passes more positional arguments than ``target`` takes (the prose's field list of
    a keyword-only type, ``ToolCall(id, name, arguments, item_id)``), its bare names too."""
    if not callable(target):
        return []
    parameters = inspect.signature(target).parameters.values()
    kinds = [parameter.kind for parameter in parameters]
    if Parameter.VAR_KEYWORD in kinds:
        return []
    named = [keyword.arg for keyword in call.keywords if keyword.arg is not None]
    positional = sum(kind in (POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD) for kind in kinds)
    if VAR_POSITIONAL not in kinds and len(call.args) > positional:
        named += [arg.id for arg in call.args if isinstance(arg, ast.Name)]
    accepted = {parameter.name for parameter in parameters}
    return [name for name in named if name not in accepted]


@pytest.mark.parametrize("path", DOCS, ids=lambda path: path.name)
def test_python_examples_call_sagents_as_it_is_defined(path: Path) -> None:
    """A later block of a document uses what an earlier one imported and made (``agent``)."""
    blocks = [block for block in PYTHON if block.path == path]
    names: dict[str, Any] = {}
    instances: dict[str, type] = {}
    for block in blocks:
        names.update(_imported(block))
        instances.update(_instances(block, names))
    errors = [error for block in blocks for error in _call_errors(block, names, instances)]
    assert errors == []


PUBLIC_MODULES = (
    "sagents.agent", "sagents.audit", "sagents.config", "sagents.core.events", "sagents.errors",
    "sagents.gateway", "sagents.mcp", "sagents.progress", "sagents.sandbox", "sagents.script",
    "sagents.skill", "sagents.store", "sagents.testing", "sagents.tool",
)  # fmt: skip


def _public_callables() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        with warnings.catch_warnings():  # a deprecated alias warns when read
            warnings.simplefilter("ignore", DeprecationWarning)
            for attribute in module.__all__:
                value = getattr(module, attribute)
                if callable(value):
                    found.setdefault(attribute, value)
    return found


def test_inline_calls_in_the_prose_name_real_parameters() -> None:
    """``ToolCall(id, name, arguments, item_id)`` and ``SAgent(max_history_tokens=N)`` in the
    text: each keyword, and each bare name listed for a keyword-only type, is a parameter."""
    public = _public_callables()
    errors, checked = [], 0
    for path in [*DOCS, ROOT / "README.md"]:
        text = path.read_text(encoding="utf-8")
        for span in re.finditer(r"`([^`\n]+)`", text):
            try:
                tree = ast.parse(span[1], mode="eval")
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                target = public.get(node.func.id)
                if target is None:
                    continue
                checked += 1
                line = text.count("\n", 0, span.start()) + 1
                errors += [
                    f"{path.name}:{line}: {node.func.id} has no parameter {name!r}: {span[1]}"
                    for name in _unknown(node, target)
                ]
    assert checked >= 50
    assert errors == []


def _free_names(block: Block) -> set[str]:
    """Names the block uses but neither defines nor imports (builtins aside)."""
    wrapped = "async def _block():\n" + textwrap.indent(block.text, "    ")
    free: set[str] = set()
    tables = [symtable.symtable(wrapped, block.where, "exec").get_children()[0]]
    while tables:
        table = tables.pop()
        tables += table.get_children()
        free |= {
            symbol.get_name()
            for symbol in table.get_symbols()
            if symbol.is_global() and not symbol.is_assigned() and not symbol.is_imported()
        }
    return free - set(dir(builtins))


def _is_script(block: Block) -> bool:
    """A script for run_script (it imports ``agent_tools``): it runs only in a sandbox."""
    return any(
        isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agent_tools"
        for node in ast.walk(_tree(block))
    )


SELF_CONTAINED = [block for block in PYTHON if not _free_names(block) and not _is_script(block)]
RUNNABLE = [block for block in SELF_CONTAINED if block.not_run is None]

RUNNER = """
import ast, asyncio, inspect, json, sys, traceback

outcomes = []
for where, text in json.load(sys.stdin):
    code = compile(text, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    try:
        result = eval(code, {"__name__": "__main__"})
        if inspect.iscoroutine(result):
            asyncio.run(result)
    except BaseException:
        outcomes.append([where, traceback.format_exc()])
    else:
        outcomes.append([where, None])
print(json.dumps(outcomes))
"""


def test_the_not_run_marks_are_on_self_contained_python_blocks() -> None:
    marked = [block for block in BLOCKS if block.not_run is not None]
    assert [block.where for block in marked if block not in SELF_CONTAINED] == []
    assert len(marked) <= 4, "keep the blocks that cannot run here few"


def test_the_self_contained_python_examples_run(tmp_path: Path) -> None:
    assert len(RUNNABLE) >= 5, [block.where for block in RUNNABLE]
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "SAGENTS_DATA_DIR": str(tmp_path / "data"),
    }
    blocks = json.dumps([[block.where, block.text] for block in RUNNABLE])
    done = subprocess.run(
        [sys.executable, "-c", RUNNER], input=blocks, cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert [where for where, _ in outcomes] == [block.where for block in RUNNABLE]
    assert {where: error for where, error in outcomes if error is not None} == {}


CONFIG_KEYS = {
    *(info.alias or field for field, info in ConfigFileParams.model_fields.items()),
    "profiles",
}
ELISIONS = ((re.compile(r"\{\s*\.\.\.\s*\}"), "{}"), (re.compile(r"\[\s*\.\.\.\s*\]"), "[]"))


def _json_value(text: str) -> Any:
    """The block's JSON value; a fragment of keys is read as an object; ``{...}`` and
    ``[...]`` as empty. Raises ValueError when it is none of these."""
    candidates = [text, "{" + text + "}"]
    for pattern, empty in ELISIONS:
        text = pattern.sub(empty, text)
    candidates += [text, "{" + text + "}"]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ValueError("not JSON")


@pytest.mark.parametrize("block", JSON, ids=lambda block: block.where)
def test_a_json_example_is_json_and_a_config_loads(
    block: Block, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        value = _json_value(block.text)
    except ValueError:
        lines = [line for line in block.text.splitlines() if line.strip()]
        if all(line.lstrip().startswith('{"type"') for line in lines):
            for line in lines:  # NDJSON events
                event_from_dict(json.loads(line))
            return
        assert "..." in block.text, f"{block.where}: neither JSON nor an elided example"
        return
    if not (isinstance(value, dict) and CONFIG_KEYS & set(value)):
        return  # a tool's result, a request body, ...: not a configuration
    environ = {name: "value" for name in re.findall(r"\$\{(\w+)\}", block.text)}
    file = tmp_path / "sagents.json"
    file.write_text(json.dumps(value), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="sagents"):
        parse_config(value, file=block.where, environ=environ)
        load_profiles(file)
    assert [record.getMessage() for record in caplog.records] == []


def test_the_skill_examples_load_as_the_text_says(tmp_path: Path) -> None:
    """docs/skills.md's ``SKILL.md`` of the specification's form loads with no problem; its
    ``skill.yaml`` of the seed form loads, reported only as non-portable."""
    (markdown,) = [block for block in BLOCKS if block.lang == "markdown"]
    (seed,) = [block for block in BLOCKS if block.lang == "yaml" and block.path.name == "skills.md"]
    spec_dir, seed_dir = tmp_path / "pdf-tools", tmp_path / "my_skill"
    spec_dir.mkdir()
    seed_dir.mkdir()
    (spec_dir / "SKILL.md").write_text(markdown.text, encoding="utf-8")
    (seed_dir / "skill.yaml").write_text(seed.text, encoding="utf-8")
    (seed_dir / "SKILL.md").write_text("# Skill: My Skill\n\nSummarise.\n", encoding="utf-8")
    spec, legacy = parse_skill_dir(spec_dir), parse_skill_dir(seed_dir)
    assert spec.skill is not None
    assert spec.problems == ()
    assert legacy.skill is not None
    assert legacy.skill.name == "my_skill"
    assert {problem.severity for problem in legacy.problems} == {"non_portable"}


COMMAND = re.compile(r"(?:^|\| |-- |instrument |\$ )\s*(?:\.venv/bin/)?sagents ([a-z][\w/-]*)(.*)")
INLINE = re.compile(r"`(?:\.venv/bin/)?sagents ([a-z][\w/-]*)([^`]*)`")
LOG_PREFIX = re.compile(r"`sagents [\w-]+(?: [\w-]+)?:")  # a message: `sagents serve: ...`


def _command_lines() -> list[tuple[str, str, str]]:
    """(where, subcommand, rest of the line) of each ``sagents`` command the docs show."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in INLINE.finditer(text):
            if LOG_PREFIX.match(match[0]):
                continue
            where = f"{path.name}:{text.count(chr(10), 0, match.start()) + 1}"
            found.append((where, match[1], match[2]))
    for block in BLOCKS:
        joined = block.text.replace("\\\n", " ")
        for offset, line in enumerate(joined.splitlines()):
            command = COMMAND.search(line.split("  #")[0])
            if command:
                # where: the block, then the line within it (continued lines joined)
                found.append((f"{block.where}+{offset}", command[1], command[2]))
    return found


def test_the_docs_show_sagents_commands() -> None:
    assert {command for _, command, _ in _command_lines()} >= {"serve", "chat", "call", "auth"}


@pytest.mark.parametrize(("where", "command", "rest"), _command_lines(), ids=str)
def test_a_sagents_command_line_names_a_command_and_its_options(
    where: str, command: str, rest: str
) -> None:
    if command == "version":
        return
    assert command in LAZY_COMMANDS, f"{where}: no command {command!r}"
    loaded: Any = load_command(command)
    if hasattr(loaded, "commands"):  # a group: auth, skills
        sub = rest.split()[0] if rest.split() else ""
        names = sub.split("/")
        assert set(names) <= set(loaded.commands), f"{where}: {command} has no {sub!r}"
        targets = {f"{command} {name}": loaded.commands[name] for name in names}
    else:
        targets = {command: loaded}
    for name, target in targets.items():
        options = {option for param in target.params for option in param.opts}
        unknown = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", rest)) - options - {"--help"}
        assert unknown == set(), f"{where}: sagents {name} has no {sorted(unknown)}"

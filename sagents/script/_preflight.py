"""The pre-flight check of a run_script script (docs/run_script.md, "Pre-flight check").

Before the sandbox starts, the script is parsed with :mod:`ast` (never executed) and every tool
call that can be read off the source is checked against the run's :class:`ScriptPlan`:

- the tool exists and this script may call it (an unknown name gets "did you mean"; a write
  tool not listed in ``tools``, a destructive or a long-task-only tool gets the plan's reason);
- literal arguments hold every ``required`` property, no property that
  ``additionalProperties: false`` forbids, and values of the JSON Schema ``type`` (and ``enum``)
  the tool's ``inputSchema`` asks for.

Only what is certain is reported, so a correct script always passes: a tool name that is not a
string literal, arguments built at run time, ``**`` unpacking or a schema keyword other than
``type``/``enum``/``required``/``properties``/``items``/``additionalProperties`` is left to the
run-time check, as without the pre-flight.

Call sites are found by what the script imports from ``agent_tools``: ``call``, ``call_raw`` and
``call_many`` (``from agent_tools import call [as c]``, ``from agent_tools import *``,
``import agent_tools [as at]``), and the typed stubs (``from agent_tools.stubs import fleet
[as f]``, ``import agent_tools.stubs.fleet as f``, ``from agent_tools.stubs.fleet import
get_device_status``): a stub call's keyword arguments are the arguments object it sends
(:meth:`sagents.script._stubs.StubCatalog.arguments`), checked the same way; an unknown stubs
module, function or keyword is a finding too (the import or the call would fail at run time).
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sagents.errors import PreflightError
from sagents.script._policy import ScriptPlan
from sagents.script._stubs import StubCatalog, stub_catalog
from sagents.tool._json_schema import json_type

__all__ = ["CALL_FUNCTIONS", "CallSite", "PreflightFinding", "check_script", "preflight_findings"]

GUEST_MODULE = "agent_tools"
STUBS_PACKAGE = "agent_tools.stubs"

CALL_FUNCTIONS: Mapping[str, Literal["one", "many"]] = {
    "call": "one",
    "call_raw": "one",
    "call_many": "many",
}
"""The ``agent_tools`` functions that call a tool: ``one`` takes ``(tool, args)``, ``many``
takes ``(tool, args_list)``."""

_ARGUMENT_NAMES = {"one": "args", "many": "args_list"}
_UNKNOWN = object()  # a value the source does not fix
_SCALARS = frozenset({"null", "boolean", "integer", "number", "string"})


@dataclass(frozen=True, kw_only=True)
class CallSite:
    """One tool call read off the source.

    Attributes:
        line: The 1-based line of the tool's name.
        tool: The tool's name (a string literal in the source).
        arguments: The expressions of the arguments objects the call sends (one for ``call``,
            one per literal item, or the item expression of a comprehension, for
            ``call_many``); None where the call sends ``{}``; empty when unknown.
    """

    line: int
    tool: str
    arguments: tuple[ast.expr | None, ...]


@dataclass(frozen=True, kw_only=True)
class PreflightFinding:
    """One mistake the pre-flight found: where (the line of the tool's name, or of the
    argument concerned) and what."""

    line: int
    tool: str
    problem: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}"


def preflight_findings(code: str, plan: ScriptPlan) -> list[PreflightFinding]:
    """The statically visible mistakes of ``code`` against ``plan``, in source order.

    A script that does not parse has none here (the run reports its ``SyntaxError``).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    findings: list[PreflightFinding] = []
    finder = _Finder(tree, plan)
    for site in finder.sites():
        findings.extend(_check_site(site, plan))
    findings += finder.stub_findings
    return sorted(findings, key=lambda finding: finding.line)  # stable: a line's own order


def check_script(code: str, plan: ScriptPlan) -> None:
    """Refuse ``code`` when the pre-flight finds a mistake.

    Raises:
        PreflightError: listing each finding with its line (``details["findings"]``:
            ``[{"line", "tool", "problem"}]``).
    """
    findings = preflight_findings(code, plan)
    if not findings:
        return
    listing = "\n".join(f"- {finding}" for finding in findings)
    raise PreflightError(
        f"run_script pre-flight check failed, nothing ran:\n{listing}",
        hint="fix these calls and run the script again",
        details={
            "findings": [{"line": f.line, "tool": f.tool, "problem": f.problem} for f in findings]
        },
    )


class _Finder:
    """Finds the call sites of one parsed script; :attr:`stub_findings` holds the mistakes
    of its stub imports and calls that are no tool call (an unknown module, function or
    keyword)."""

    def __init__(self, tree: ast.Module, plan: ScriptPlan) -> None:
        self._tree = tree
        self._plan = plan
        self._catalog: StubCatalog | None = None  # made when the script imports stubs
        self._functions: dict[str, str] = {}  # local name -> agent_tools function
        self._modules: set[str] = set()  # local names of the agent_tools module
        self._stub_modules: dict[str, str] = {}  # local name -> stubs module
        self._stub_functions: dict[str, tuple[str, str]] = {}  # local name -> (module, function)
        self.stub_findings: list[PreflightFinding] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == GUEST_MODULE:
                for alias in node.names:
                    if alias.name == "*":
                        self._functions.update({name: name for name in CALL_FUNCTIONS})
                    elif alias.name in CALL_FUNCTIONS:
                        self._functions[alias.asname or alias.name] = alias.name
            elif (
                isinstance(node, ast.ImportFrom) and node.module == STUBS_PACKAGE and not node.level
            ):
                for alias in node.names:
                    if alias.name != "*" and self._known_module(alias.name, node.lineno):
                        self._stub_modules[alias.asname or alias.name] = alias.name
            elif (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith(STUBS_PACKAGE + ".")
                and not node.level
            ):
                module = (node.module or "").removeprefix(STUBS_PACKAGE + ".")
                if "." in module or not self._known_module(module, node.lineno):
                    continue
                for alias in node.names:
                    if alias.name != "*" and self._known_function(module, alias.name, node.lineno):
                        self._stub_functions[alias.asname or alias.name] = (module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == GUEST_MODULE:
                        self._modules.add(alias.asname or alias.name)
                    elif alias.name.startswith(STUBS_PACKAGE + ".") and alias.asname:
                        module = alias.name.removeprefix(STUBS_PACKAGE + ".")
                        if "." not in module and self._known_module(module, node.lineno):
                            self._stub_modules[alias.asname] = module

    def catalog(self) -> StubCatalog:
        if self._catalog is None:
            self._catalog = stub_catalog(self._plan.offered or self._plan.callable.values())
        return self._catalog

    def _stub_finding(self, line: int, name: str, problem: str) -> None:
        self.stub_findings.append(PreflightFinding(line=line, tool=name, problem=problem))

    def _known_module(self, module: str, line: int) -> bool:
        modules = self.catalog().modules
        if module in modules:
            return True
        close = difflib.get_close_matches(module, list(modules), n=3)
        also = "; did you mean " + " or ".join(map(repr, close)) + "?" if close else ""
        self._stub_finding(line, module, f"no stubs module {module!r} in this run{also}")
        return False

    def _known_function(self, module: str, function: str, line: int) -> bool:
        functions = self.catalog().modules[module]
        if function in functions:
            return True
        for name in (f"{module}__{function}", function):  # a tool scripts may not call
            if name in self._plan.refusals:
                self._stub_finding(line, name, self._plan.refusals[name])
                return False
        close = difflib.get_close_matches(function, list(functions), n=3)
        also = "; did you mean " + " or ".join(map(repr, close)) + "?" if close else ""
        self._stub_finding(
            line, function, f"no function {function!r} in agent_tools.stubs.{module}{also}"
        )
        return False

    def sites(self) -> Iterator[CallSite]:
        if (
            not self._functions
            and not self._modules
            and not self._stub_modules
            and not self._stub_functions
        ):
            return
        for node in ast.walk(self._tree):
            if isinstance(node, ast.Call):
                site = self.site(node)
                if site is not None:
                    yield site

    def site(self, node: ast.Call) -> CallSite | None:
        func = node.func
        stub = self._stub_target(func)
        if stub is not None:
            return self._stub_site(node, *stub)
        if isinstance(func, ast.Name):
            name = self._functions.get(func.id)
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self._modules
        ):
            name = func.attr if func.attr in CALL_FUNCTIONS else None
        else:
            name = None
        if name is None:
            return None
        kind = CALL_FUNCTIONS[name]
        tool = _argument(node, 0, "tool")
        if not (isinstance(tool, ast.Constant) and isinstance(tool.value, str)):
            return None
        given = _argument(node, 1, _ARGUMENT_NAMES[kind])
        if kind == "one":
            arguments: tuple[ast.expr | None, ...] = (given,)
        else:
            arguments = _items(given)
        return CallSite(line=tool.lineno, tool=tool.value, arguments=arguments)

    def _stub_target(self, func: ast.expr) -> tuple[str, str, int] | None:
        """``(module, function, line)`` when ``func`` names a stub function."""
        if isinstance(func, ast.Name) and func.id in self._stub_functions:
            return (*self._stub_functions[func.id], func.lineno)
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self._stub_modules
        ):
            module = self._stub_modules[func.value.id]
            if self._known_function(module, func.attr, func.lineno):
                return module, func.attr, func.lineno
        return None

    def _stub_site(self, node: ast.Call, module: str, function: str, line: int) -> CallSite | None:
        """A stub call as the ``call`` it makes: its keywords become the arguments object
        (``_fields`` reads a ``dict(...)`` call), under the properties' own names."""
        found = self.catalog().arguments(module, function)
        if found is None or node.args:
            return None  # positional arguments: a TypeError at run time, left to it
        tool, names, extra = found
        keywords: list[ast.keyword] = []
        for keyword in node.keywords:
            if keyword.arg is None:  # **mapping: the keys are not known
                keywords.append(keyword)
            elif keyword.arg in names:
                keywords.append(ast.keyword(arg=names[keyword.arg], value=keyword.value))
            elif extra:
                keywords.append(keyword)
            else:
                close = difflib.get_close_matches(keyword.arg, list(names), n=1)
                also = f" (did you mean {close[0]!r}?)" if close else ""
                self._stub_finding(
                    keyword.value.lineno,
                    tool,
                    f"{module}.{function}() has no argument {keyword.arg!r}{also}",
                )
                return None
        arguments = ast.Call(func=ast.Name(id="dict", ctx=ast.Load()), args=[], keywords=keywords)
        ast.copy_location(arguments, node)
        return CallSite(line=line, tool=tool, arguments=(arguments,))


def _argument(node: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if any(isinstance(arg, ast.Starred) for arg in node.args[: position + 1]):
        return None
    if len(node.args) > position:
        return node.args[position]
    for item in node.keywords:
        if item.arg == keyword:
            return item.value
    return None


def _items(node: ast.expr | None) -> tuple[ast.expr | None, ...]:
    """The arguments objects of a ``call_many`` list, as far as the source fixes them."""
    if isinstance(node, ast.List | ast.Tuple):
        if any(isinstance(item, ast.Starred) for item in node.elts):
            return tuple(item for item in node.elts if not isinstance(item, ast.Starred))
        return tuple(node.elts)
    if isinstance(node, ast.ListComp | ast.GeneratorExp):
        return (node.elt,)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):  # [{...}] * n
        for side in (node.left, node.right):
            if isinstance(side, ast.List | ast.Tuple):
                return _items(side)
    return ()


def _check_site(site: CallSite, plan: ScriptPlan) -> Iterator[PreflightFinding]:
    def finding(problem: str, line: int | None = None) -> PreflightFinding:
        return PreflightFinding(line=line or site.line, tool=site.tool, problem=problem)

    spec = plan.callable.get(site.tool)
    if spec is None:
        refusal = plan.refusals.get(site.tool)
        if refusal is not None:
            yield finding(refusal)
            return
        problem = f"no tool {site.tool!r} is available to this script"
        close = difflib.get_close_matches(site.tool, list(plan.callable), n=3)
        if close:
            problem += "; did you mean " + " or ".join(repr(name) for name in close) + "?"
        yield finding(problem)
        return
    seen: set[str] = set()
    for expr in site.arguments:
        for line, problem in _object_problems(expr, spec.input_schema, f"{site.tool!r}"):
            if problem not in seen:  # one line per mistake, not one per call_many item
                seen.add(problem)
                yield finding(problem, line)


def _fields(expr: ast.expr | None) -> tuple[dict[str, ast.expr], bool] | None:
    """The literal keys of an arguments object and whether they are all of its keys."""
    if expr is None or (isinstance(expr, ast.Constant) and expr.value is None):
        return {}, True
    if isinstance(expr, ast.Dict):
        fields: dict[str, ast.expr] = {}
        complete = True
        for key, value in zip(expr.keys, expr.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                fields[key.value] = value
            else:  # ** unpacking or a computed key
                complete = False
        return fields, complete
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "dict"
        and not expr.args
    ):
        named = {k.arg: k.value for k in expr.keywords if k.arg is not None}
        return named, len(named) == len(expr.keywords)
    return None


def _object_problems(
    expr: ast.expr | None, schema: Mapping[str, Any], where: str
) -> Iterator[tuple[int | None, str]]:
    """``(line, problem)`` of an arguments object (line None: the call's)."""
    found = _fields(expr)
    if found is None:
        return
    fields, complete = found
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    if complete:
        required = schema.get("required")
        missing = [
            name for name in (required if isinstance(required, list) else []) if name not in fields
        ]
        if missing:
            names = ", ".join(repr(name) for name in missing)
            yield _line(expr), f"{where} is missing the required argument(s) {names}"
    if schema.get("additionalProperties") is False and "patternProperties" not in schema:
        for name in fields:
            if name not in properties:
                hint = difflib.get_close_matches(name, list(properties), n=1)
                also = f" (did you mean {hint[0]!r}?)" if hint else ""
                yield _line(fields[name]), f"{where} has no argument {name!r}{also}"
    for name, value in fields.items():
        sub = properties.get(name)
        if isinstance(sub, Mapping):
            yield from _value_problems(value, sub, f"{where} argument {name!r}")


def _value_problems(
    expr: ast.expr, schema: Mapping[str, Any], where: str
) -> Iterator[tuple[int | None, str]]:
    value = _literal(expr)
    if value is not _UNKNOWN:
        enum = schema.get("enum")
        if isinstance(enum, list) and enum and not any(_same(value, item) for item in enum):
            allowed = ", ".join(repr(item) for item in enum[:10])
            yield expr.lineno, f"{where} is {value!r}, not one of {allowed}"
            return
    kind = _json_type(expr)
    allowed_types = _types(schema)
    if kind is None or allowed_types is None:
        return
    if not any(_type_fits(kind, str(t), value) for t in allowed_types):
        wanted = " or ".join(str(t) for t in allowed_types)
        yield expr.lineno, f"{where} must be of type {wanted}, not {kind}"
        return
    if kind == "object" and "object" in allowed_types:
        yield from _object_problems(expr, schema, where)
    elif kind == "array" and isinstance(expr, ast.List | ast.Tuple):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(expr.elts):
                if not isinstance(item, ast.Starred):
                    yield from _value_problems(item, items, f"{where}[{index}]")


def _types(schema: Mapping[str, Any]) -> list[str] | None:
    """The JSON types a schema allows, when it says so plainly (``type``, or an ``anyOf`` /
    ``oneOf`` of branches that each have a ``type``); None when it does not."""
    expected = schema.get("type")
    if isinstance(expected, str):
        return [expected]
    if isinstance(expected, list):
        return [str(t) for t in expected]
    if expected is not None:
        return None
    branches = schema.get("anyOf", schema.get("oneOf"))
    if not isinstance(branches, list) or not branches:
        return None
    types: list[str] = []
    for branch in branches:
        found = _types(branch) if isinstance(branch, Mapping) else None
        if found is None:
            return None
        types += found
    return types


def _line(expr: ast.expr | None) -> int | None:
    return None if expr is None else expr.lineno


def _same(value: Any, item: Any) -> bool:
    return (type(value) is type(item) and value == item) or (
        isinstance(value, int | float)
        and isinstance(item, int | float)
        and not isinstance(value, bool)
        and not isinstance(item, bool)
        and value == item
    )


def _literal(expr: ast.expr) -> Any:
    """The constant an expression is, or ``_UNKNOWN``."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if (
        isinstance(expr, ast.UnaryOp)
        and isinstance(expr.op, ast.USub | ast.UAdd)
        and isinstance(expr.operand, ast.Constant)
        and isinstance(expr.operand.value, int | float)
        and not isinstance(expr.operand.value, bool)
    ):
        return -expr.operand.value if isinstance(expr.op, ast.USub) else expr.operand.value
    return _UNKNOWN


def _json_type(expr: ast.expr) -> str | None:
    """The JSON type a literal expression certainly has, or None when the source leaves it open."""
    value = _literal(expr)
    if value is not _UNKNOWN:
        kind = json_type(value)
        return kind if kind in _SCALARS else None  # bytes, Ellipsis, complex: not JSON
    if isinstance(expr, ast.JoinedStr):
        return "string"
    if isinstance(expr, ast.List | ast.Tuple | ast.ListComp):
        return "array"
    if isinstance(expr, ast.Dict | ast.DictComp):
        return "object"
    return None


def _type_fits(kind: str, expected: str, value: Any) -> bool:
    if kind == expected:
        return True
    if expected == "number":
        return kind == "integer"
    if expected == "integer":  # JSON Schema: 1.0 is an integer
        return kind == "number" and isinstance(value, float) and value.is_integer()
    return False

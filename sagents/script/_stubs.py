"""Typed stubs of a run's tools: ``from agent_tools.stubs import fleet`` (docs/run_script.md,
"Typed stubs").

For each run the host generates one Python module per server (``local`` for the application's
own tools) from the offered tools' ``inputSchema`` / ``outputSchema``: a ``TypedDict`` for the
arguments and one for the structured result where the schema has one, and a function per tool
with keyword-only parameters and a docstring (the description, the permission class, each
argument's description). Each function is a thin :func:`agent_tools.call` underneath, so a stub
call is a ``call`` in every respect (policy, limits, records, ``ToolError``).

Which tools: read-only tools and write tools, listed in run_script's ``tools`` or not (a write
tool the script did not list is stubbed too; calling it raises the same ``ToolError`` as
``call`` does). Destructive and long-task-only tools are left out: scripts cannot call them.

Names that are not Python identifiers (``get-status``, ``class``, ``2fa``) are mapped
reversibly: a module, function or parameter name is made an identifier, and the generated code
sends the original name. Schemas that Python typing cannot express exactly (unions of objects,
``allOf``, recursive ``$ref``, tuples, ``not``) become ``dict[str, Any]`` or ``Any`` with the
schema in the docstring; constraints (``pattern``, ``minimum``, ``format``...) are in the
docstring too.

The guest asks for a module when the script imports it (the ``stubs`` request of
:mod:`sagents.script._protocol`): nothing is written or loaded for a script that does not use
stubs, and a spare sandbox started before the run needs nothing of it.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sagents.core._spec import ToolSpec
from sagents.tool._json_schema import resolve_local_ref

__all__ = [
    "LOCAL_MODULE",
    "STUBBED_PERMISSIONS",
    "StubCatalog",
    "python_identifier",
    "python_identifiers",
    "stub_catalog",
]

LOCAL_MODULE = "local"
"""The stubs module of the application's own (local) tools."""

STUBBED_PERMISSIONS = frozenset({"read_only", "write"})
"""Permission classes that get a stub (destructive and long-task-only tools cannot be called
from scripts)."""

_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_CONSTRAINTS = (
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "const",
)
_RESERVED = frozenset(
    {"Any", "Literal", "NotRequired", "TypedDict", "TYPE_CHECKING", "annotations"}
)
_NOT_WORD = re.compile(r"\W", re.ASCII)
_MAX_REF_DEPTH = 8
_MAX_INLINE_KEYS = 8
_MAX_SCHEMA_DOC_CHARS = 600  # the schema quoted in a docstring, when typing cannot express it
_MAX_SCHEMA_NODES = 2000  # schema nodes typed per schema; past it, dict/Any (a hostile schema
# of a few kilobytes fans out through $ref to millions of nodes)
_MAX_SIGNATURE_CHARS = 600  # a one-line signature, cut past it


def python_identifier(name: str, taken: Container[str] = ()) -> str:
    """``name`` as a public Python identifier that is neither a keyword nor in ``taken``: other
    characters become ``_``, leading underscores go, a leading digit gets ``n_`` before it, a
    keyword gets ``_`` after it and a clash ``_2``, ``_3``... (the generated code keeps the
    original name beside it, so the mapping is reversible)."""
    candidate = _NOT_WORD.sub("_", name) or "_"
    if candidate[0].isdigit():
        candidate = "n_" + candidate
    candidate = candidate.lstrip("_") or "n_"
    if keyword.iskeyword(candidate) or keyword.issoftkeyword(candidate):
        candidate += "_"
    unique, suffix = candidate, 2
    while unique in taken or unique in _RESERVED:
        unique, suffix = f"{candidate}_{suffix}", suffix + 1
    return unique


def python_identifiers(names: Iterable[str], taken: Container[str] = ()) -> dict[str, str]:
    """Each of ``names`` → its :func:`python_identifier`, unique: a name that is already a
    public identifier keeps it whatever its position (``a_b`` stays ``a_b`` even after
    ``a-b``, which becomes ``a_b_2``), the others are mapped in order."""
    names = list(dict.fromkeys(names))
    mapped: dict[str, str] = {}
    used: set[str] = set()
    for name in names:  # exact names first
        if name not in taken and python_identifier(name, used) == name:
            mapped[name] = name
            used.add(name)
    for name in names:
        if name not in mapped:
            mapped[name] = python_identifier(name, _Union(used, taken))
            used.add(mapped[name])
    return {name: mapped[name] for name in names}


@dataclass(frozen=True)
class _Union:
    """Two containers as one (``in`` either)."""

    first: Container[str]
    second: Container[str]

    def __contains__(self, item: object) -> bool:
        return item in self.first or item in self.second


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "T"


@dataclass(frozen=True, kw_only=True)
class StubCatalog:
    """The stubs of one run: module name → the tools in it (function name → registered tool
    name), and each module's source, generated on first request.

    Attributes:
        modules: Module name (an identifier) → function name → the tool's registered name.
    """

    modules: Mapping[str, Mapping[str, str]]
    _specs: Mapping[str, ToolSpec]
    _sources: dict[str, str] = field(default_factory=dict)
    _arguments: dict[tuple[str, str], tuple[str, dict[str, str], bool] | None] = field(
        default_factory=dict
    )

    def source(self, module: str) -> str | None:
        """The Python source of ``module``, or None when there is no such module."""
        functions = self.modules.get(module)
        if functions is None:
            return None
        cached = self._sources.get(module)
        if cached is None:
            cached = _ModuleWriter(module, functions).write(
                (function, self._specs[tool]) for function, tool in functions.items()
            )
            self._sources[module] = cached
        return cached

    def arguments(self, module: str, function: str) -> tuple[str, dict[str, str], bool] | None:
        """What a call of ``module.function`` sends: the tool's registered name, each
        parameter's property name by its Python name, and whether ``**extra`` arguments are
        sent too; None when there is no such function. Worked out once per function (a
        script may call one a thousand times)."""
        if (module, function) not in self._arguments:
            tool = self.modules.get(module, {}).get(function)
            found = None
            if tool is not None:
                shape = _ModuleWriter(module, inline=True)._shape(function, self._specs[tool])
                found = tool, {p.name: p.key for p in shape.parameters}, shape.extra is not None
            self._arguments[(module, function)] = found
        return self._arguments[(module, function)]

    def signatures(self, module: str) -> list[tuple[str, str]]:
        """``(tool name, one-line signature)`` per tool of ``module``: the condensed form
        (``get_device_status(*, sn: str) -> {sn: str, online: bool, ...}``)."""
        return [
            (tool, self.signature(module, function))
            for function, tool in self.modules.get(module, {}).items()
        ]

    def signature(self, module: str, function: str) -> str:
        """The one-line signature of ``module.function`` (see :meth:`signatures`)."""
        tool = self.modules[module][function]
        line = _ModuleWriter(module, inline=True).signature(function, self._specs[tool])
        if len(line) > _MAX_SIGNATURE_CHARS:
            line = line[: _MAX_SIGNATURE_CHARS - 5] + " ...)"
        return line

    def locate(self) -> dict[str, tuple[str, str]]:
        """Each tool's ``(module, function)``, by its registered name."""
        return {
            tool: (module, function)
            for module, functions in self.modules.items()
            for function, tool in functions.items()
        }


def module_name_of(spec: ToolSpec) -> str:
    """The (not yet identifier-mapped) group a tool's stub belongs to: its MCP server, else
    ``local``."""
    if spec.source.kind == "mcp" and spec.source.server:
        return spec.source.server
    return LOCAL_MODULE


def _function_name_of(spec: ToolSpec) -> str:
    if spec.source.kind == "mcp" and spec.source.original_name:
        return spec.source.original_name
    if spec.source.kind == "mcp" and spec.source.server:
        return spec.name.removeprefix(f"{spec.source.server}__")
    return spec.name


def stub_catalog(specs: Iterable[ToolSpec]) -> StubCatalog:
    """The stubs of the tools ``specs`` (those of a stubbed permission class), grouped by
    server, names mapped to identifiers (stable: the order of ``specs``)."""
    groups: dict[str, list[ToolSpec]] = {}
    for spec in specs:
        if spec.permission in STUBBED_PERMISSIONS:
            groups.setdefault(module_name_of(spec), []).append(spec)
    modules: dict[str, dict[str, str]] = {}
    by_name: dict[str, ToolSpec] = {}
    module_names = python_identifiers(groups)
    for group, members in groups.items():
        names = python_identifiers(_function_name_of(spec) for spec in members)
        functions: dict[str, str] = {}
        for spec in members:
            name = names[_function_name_of(spec)]
            if name in functions:  # two tools of one original name: the later one is numbered
                name = python_identifier(name, _Union(functions, set(names.values())))
            functions[name] = spec.name
            by_name[spec.name] = spec
        modules[module_names[group]] = functions
    return StubCatalog(modules=modules, _specs=by_name)


@dataclass(frozen=True)
class _Parameter:
    name: str  # the Python name
    key: str  # the property it is sent as
    annotation: str
    required: bool
    note: str  # the schema, when the annotation is not exact


@dataclass
class _Shape:
    """A tool's function: its parameters, a ``**extra`` for arguments the schema allows beyond
    its named properties, and its result."""

    parameters: list[_Parameter] = field(default_factory=list)
    extra: str | None = None
    extra_note: str = ""
    result: str = "Any"
    result_notes: list[str] = field(default_factory=list)

    def parameters_text(self, omitted: str = "...") -> str:
        """The parameter list; an optional parameter's default is ``omitted``."""
        rendered = [
            f"{p.name}: {p.annotation}" + ("" if p.required else f" = {omitted}")
            for p in self.parameters
        ]
        if self.extra:
            rendered.append(f"**{self.extra}: Any")
        if self.parameters:
            rendered.insert(0, "*")
        return ", ".join(rendered)


def _root_object(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """The root object of an input schema (through a root ``$ref``) and whether it takes
    arguments beyond its named properties: an ``additionalProperties`` other than false with
    no properties named, ``patternProperties``, or a combinator at the root."""
    node: Any = schema
    for _ in range(_MAX_REF_DEPTH):
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str):
            break
        try:
            node = resolve_local_ref(schema, ref)
        except KeyError:
            return {}, True
    if not isinstance(node, Mapping):
        return {}, True
    extra = node.get("additionalProperties")
    open_ = any(
        key in node for key in ("anyOf", "oneOf", "allOf", "patternProperties", "if")
    ) or extra not in (None, False)
    return node, open_


class _ModuleWriter:
    """Writes one stubs module: the TypedDicts first (nested ones before their users), then
    the functions."""

    def __init__(self, module: str, functions: Iterable[str] = (), *, inline: bool = False) -> None:
        self.module = module
        self.inline = inline  # objects written in place ({sn: str, ...}), not as TypedDicts
        self.types: list[str] = []
        self.type_names: set[str] = set(functions)

    def write(self, tools: Iterable[tuple[str, ToolSpec]]) -> str:
        functions = [self._function(function, spec) for function, spec in tools]
        header = [
            f'"""Typed stubs of the {self.module!r} tools of this run (generated from their',
            'schemas; docs/run_script.md, "Typed stubs"). Each function calls',
            '``agent_tools.call``: the same policy, limits and ``ToolError``."""',
            "",
            "from __future__ import annotations",
            "",
            "from agent_tools import call as _call",
            "",
            "# The types are for reading and for type checkers: importing typing would cost",
            "# every script that imports stubs about 10 ms.",
            "TYPE_CHECKING = False",
            "if TYPE_CHECKING:",
            "    from typing import Any, Literal, NotRequired, TypedDict",
            *(
                f"    {line}" if line else ""
                for type_ in self.types
                for line in ["", *type_.splitlines()]
            ),
            "",
            "_OMITTED: Any = object()  # the default of an optional argument: not sent",
            "",
            "__all__ = " + repr(sorted(function for function, _ in functions)),
            "",
        ]
        return "\n".join([*header, *(code for _, code in functions)]) + "\n"

    def signature(self, function: str, spec: ToolSpec) -> str:
        shape = self._shape(function, spec)
        returns = f" -> {shape.result}" if shape.result != "Any" else ""
        return f"{function}({shape.parameters_text()}){returns}"

    def _shape(self, function: str, spec: ToolSpec) -> _Shape:
        schema, open_ = _root_object(spec.input_schema)
        typer = _Typer(self, spec.input_schema)
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        required_set = set(required) if isinstance(required, list) else set()
        shape = _Shape()
        keys = sorted(properties, key=lambda key: key not in required_set)
        names = python_identifiers(str(key) for key in keys)
        taken: set[str] = set(names.values())
        for key in keys:
            name = names[str(key)]
            annotation, note = typer.annotation(properties[key], _camel(function) + _camel(name))
            shape.parameters.append(
                _Parameter(name, str(key), annotation, key in required_set, note)
            )
        if open_:
            shape.extra = python_identifier("extra", taken)
            shape.extra_note = f"Other arguments, sent as given. Schema: {_json(spec.input_schema)}"
        if spec.output_schema:
            shape.result, note = _Typer(self, spec.output_schema).annotation(
                spec.output_schema, _camel(function) + "Result"
            )
            if note:
                shape.result_notes.append(note)
        return shape

    def _function(self, function: str, spec: ToolSpec) -> tuple[str, str]:
        shape = self._shape(function, spec)
        lines = [f"def {function}({shape.parameters_text('_OMITTED')}) -> {shape.result}:"]
        doc = [spec.description.strip() or spec.name, ""]
        doc.append(_permission_line(spec))
        arg_lines = []
        for parameter in shape.parameters:
            text = " ".join(
                part
                for part in (
                    f"(sent as {parameter.key!r})" if parameter.name != parameter.key else "",
                    _property_description(spec.input_schema, parameter.key),
                    "" if parameter.required else "Optional.",
                    parameter.note,
                )
                if part
            )
            if text:
                arg_lines.append(f"    {parameter.name}: {text}")
        if shape.extra:
            arg_lines.append(f"    {shape.extra}: {shape.extra_note}")
        if arg_lines:
            doc += ["", "Args:", *arg_lines]
        if shape.result_notes:
            doc += ["", "Returns:", *(f"    {note}" for note in shape.result_notes)]
        lines.append(_docstring(doc))
        required = ", ".join(f"{p.key!r}: {p.name}" for p in shape.parameters if p.required)
        lines.append(f"    _args: dict[str, Any] = {{{required}}}")
        for parameter in shape.parameters:
            if not parameter.required:
                lines.append(f"    if {parameter.name} is not _OMITTED:")
                lines.append(f"        _args[{parameter.key!r}] = {parameter.name}")
        if shape.extra:
            lines.append(f"    _args.update({shape.extra})")
        lines.append(f"    return _call({spec.name!r}, _args)")
        lines.append("")
        return function, "\n".join(["", *lines])

    def add_type(self, wanted: str, body: str) -> str:
        """Define a TypedDict named ``wanted`` (made unique) and return its name."""
        name = python_identifier(wanted, self.type_names)
        self.type_names.add(name)
        self.types.append(body.replace("__NAME__", name))
        return name


def _permission_line(spec: ToolSpec) -> str:
    if spec.permission == "read_only":
        return "Permission: read-only (callable from any script)."
    return (
        f"Permission: write: list {spec.name!r} in run_script's `tools` to call it; "
        "otherwise it raises ToolError (not_allowed)."
    )


def _property_description(schema: Mapping[str, Any], key: str) -> str:
    properties = schema.get("properties")
    sub = properties.get(key) if isinstance(properties, Mapping) else None
    if not isinstance(sub, Mapping):
        return ""
    text = sub.get("description")
    parts = [" ".join(str(text).split())] if isinstance(text, str) and text.strip() else []
    constraints = {k: sub[k] for k in _CONSTRAINTS if k in sub}
    if "default" in sub:
        constraints["default"] = sub["default"]
    if constraints:
        parts.append(_json(constraints))
    return " ".join(parts)


def _docstring(lines: list[str]) -> str:
    body = [_docstring_line(line) for line in "\n".join(lines).splitlines()]
    indented = "\n".join(("    " + line) if line else "" for line in body)
    return f'    """{indented.lstrip()}\n    """'


def _docstring_line(line: str) -> str:
    """One line of upstream text as the inside of a (non-raw) triple-quoted string whose value
    is that text: backslashes and quotes escaped, and every character a source file cannot hold
    as it is (a null byte, a lone surrogate) or a reader would not see (controls) written as
    its escape."""
    text = line.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() or char == "\t" else char.encode("unicode_escape").decode()
        for char in text
    )


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) > _MAX_SCHEMA_DOC_CHARS:
        text = text[:_MAX_SCHEMA_DOC_CHARS] + "…"
    return text


class _Typer:
    """JSON Schema → annotation, inside one tool's schema (for its local ``$ref``)."""

    def __init__(self, writer: _ModuleWriter, document: Mapping[str, Any]) -> None:
        self.writer = writer
        self.document = document
        self.nodes = 0  # schema nodes typed so far (bounded by _MAX_SCHEMA_NODES)

    def annotation(self, schema: Any, name: str) -> tuple[str, str]:
        """``(annotation, note)``: the note quotes the schema when the annotation is not
        exact."""
        exact = self._type(schema, name, 0)
        if exact is not None and self.nodes <= _MAX_SCHEMA_NODES:
            return exact
        fallback = "dict[str, Any]" if _is_object_like(schema) else "Any"
        return fallback, f"Schema: {_json(schema)}"

    def _type(self, schema: Any, name: str, depth: int) -> tuple[str, str] | None:
        self.nodes += 1
        if self.nodes > _MAX_SCHEMA_NODES:
            return None
        if schema is True or schema == {}:
            return "Any", ""
        if not isinstance(schema, Mapping) or depth > _MAX_REF_DEPTH:
            return None
        ref = schema.get("$ref")
        if isinstance(ref, str):
            try:
                target = resolve_local_ref(self.document, ref)
            except KeyError:
                return None
            return self._type(target, name, depth + 1)
        if "allOf" in schema or "not" in schema or "prefixItems" in schema:
            return None
        if "enum" in schema:
            return _literal(schema["enum"])
        if "const" in schema:
            return _literal([schema["const"]])
        for union in ("anyOf", "oneOf"):
            if union in schema:
                options = schema[union]
                if not isinstance(options, list) or not options:
                    return None
                if any(_is_object_like(option) for option in options):
                    return None
                return self._union(options, name, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._union([{**schema, "type": one} for one in kind], name, depth)
        if kind in _SCALARS:
            return _SCALARS[kind], ""
        if kind == "array":
            items = schema.get("items", True)
            if isinstance(items, list):
                return None
            inner = self._type(items, name + "Item", depth + 1)
            return (f"list[{inner[0]}]", "") if inner is not None else None
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema, name, depth)
        if kind is None and not any(key in schema for key in ("items", "additionalProperties")):
            return "Any", ""
        return None

    def _union(self, options: list[Any], name: str, depth: int) -> tuple[str, str] | None:
        parts: list[str] = []
        for index, option in enumerate(options):
            typed = self._type(option, f"{name}{index + 1}", depth + 1)
            if typed is None:
                return None
            if typed[0] not in parts:
                parts.append(typed[0])
        return " | ".join(parts), ""

    def _object(self, schema: Mapping[str, Any], name: str, depth: int) -> tuple[str, str] | None:
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not properties:
            if extra in (None, True):
                return "dict[str, Any]", ""
            inner = self._type(extra, name + "Value", depth + 1)
            return (f"dict[str, {inner[0]}]", "") if inner is not None else None
        if not isinstance(properties, Mapping) or extra not in (None, True, False):
            return None  # typed extra properties next to named ones: no TypedDict says that
        required = schema.get("required")
        required_set = set(required) if isinstance(required, list) else set()
        if self.writer.inline:
            return self._inline(properties, required_set, name, depth), ""
        fields: list[str] = []
        for key, sub in properties.items():
            typed = self._type(sub, name + _camel(python_identifier(str(key))), depth + 1)
            annotation = typed[0] if typed is not None else _fallback(sub)
            if key not in required_set:
                annotation = f"NotRequired[{annotation}]"
            fields.append(f"        {str(key)!r}: {annotation},")
        body = "\n".join(
            ["__NAME__ = TypedDict(", '    "__NAME__",', "    {", *fields, "    },", ")"]
        )
        return self.writer.add_type(name, body), ""

    def _inline(
        self, properties: Mapping[str, Any], required: set[str], name: str, depth: int
    ) -> str:
        """``{sn: str, limit?: int, ...}``: an object in a one-line signature."""
        if depth > 4:
            return "dict"
        fields = []
        for key in list(properties)[:_MAX_INLINE_KEYS]:
            typed = self._type(properties[key], name, depth + 1)
            label = key if str(key).isidentifier() else repr(key)
            optional = "" if key in required else "?"
            fields.append(f"{label}{optional}: {typed[0] if typed else _fallback(properties[key])}")
        if len(properties) > _MAX_INLINE_KEYS:
            fields.append("...")
        return "{" + ", ".join(fields) + "}"


def _fallback(schema: Any) -> str:
    return "dict[str, Any]" if _is_object_like(schema) else "Any"


def _literal(values: Any) -> tuple[str, str] | None:
    if not isinstance(values, list) or not values:
        return None
    if not all(value is None or isinstance(value, str | int | bool) for value in values):
        return None  # floats, lists and objects have no Literal
    literals = [repr(value) for value in values if value is not None]
    text = f"Literal[{', '.join(literals)}]" if literals else ""
    if any(value is None for value in values):
        text = f"{text} | None" if text else "None"
    return text, ""


def _is_object_like(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    options = schema.get("anyOf", schema.get("oneOf"))
    if kind is None and isinstance(options, list) and options:
        return all(_is_object_like(option) for option in options)
    return kind == "object" or "properties" in schema

"""Export tools as Gemini function declarations, and read Gemini's function calls back.

Gemini's ``FunctionDeclaration.parameters`` is a ``Schema``: "a select subset of an OpenAPI 3.0
schema object" (Gemini API reference, "Function calling" and ``Schema``,
https://ai.google.dev/api/caching#Schema; Vertex AI ``FunctionDeclaration``). The export
inlines every ``$ref`` of the faithful document (:mod:`sagents.tool.export_inline`: exact,
bounded, recursion refused), with ``strict=True`` applies OpenAI's strict rewrite (every
property required, optional ones nullable: ``run_tool(strict=True)`` reads their ``null`` as
"absent"), and rewrites the rest:

* ``type`` becomes the OpenAPI enum name (``STRING``, ``INTEGER``, ``NUMBER``, ``BOOLEAN``,
  ``ARRAY``, ``OBJECT``); ``null`` in a type list, an ``anyOf`` branch, an ``enum`` or a ``const``
  becomes ``nullable: true``; several types become an ``anyOf`` of one branch per type.
* ``oneOf`` becomes ``anyOf``; a string ``const`` a one-value ``enum``.
* ``additionalProperties: false`` is dropped (the subset has no closed objects).
* Keywords outside the subset that constrain a value (``exclusiveMinimum``, ``multipleOf``,
  ``uniqueItems``, ``not``, a non-string ``enum``, a string ``format`` other than ``date-time``,
  ...) are removed and written into the ``description``, as the strict export does.

So the declaration accepts every input the original accepts (it may accept more: arguments are
validated against the original schema in ``ToolManager.run_tool``). A tool that cannot be
declared so is refused with :class:`~sagents.errors.SchemaExportError` (``get_gemini_tools``
leaves it out with a warning), never changed in meaning: a value of any type (``{}``, an array
without ``items``), an object with no fixed properties below the root (the API answers
"properties: should be non-empty for OBJECT type"), a recursive ``$ref``, or an ``allOf``
without an exact merge. A parameter name outside ``^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`` (the
``FunctionDeclaration.parameters`` rule) is declared under another name
(:func:`gemini_parameter_name`; its description names the real one), and
:func:`parse_gemini_function_call` puts the arguments back under their own names. A tool
without parameters gets no ``parameters`` at all (the API refuses an ``OBJECT`` without
properties).

Function names follow the stricter of the Gemini API's and Vertex AI's rules: a letter or ``_``
first, then ``[a-zA-Z0-9_-]``, at most 64 characters (:func:`gemini_function_name`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SchemaExportError
from sagents.tool._examples import description_with_examples
from sagents.tool._export_calls import ModelToolCall, call_arguments, field_of, resolve_call_name
from sagents.tool._export_faithful import faithful_schema
from sagents.tool._export_strict import strict_schema
from sagents.tool._json_schema import escape_pointer, fixed_length, json_type
from sagents.tool._provider import ToolProvider
from sagents.tool.export_inline import distribute_unions, inline_schema, merge_schemas
from sagents.tool.naming import to_exported_name

__all__ = [
    "GEMINI_NAME_PATTERN",
    "GEMINI_PARAMETER_NAME_PATTERN",
    "declare_gemini_arguments",
    "gemini_function_name",
    "gemini_function_response",
    "gemini_parameter_name",
    "gemini_schema",
    "parse_gemini_function_call",
    "parse_gemini_function_calls",
    "restore_gemini_arguments",
    "to_gemini_function_declaration",
]

GEMINI_NAME_PATTERN = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
"""Function names every Gemini endpoint accepts (Vertex AI's rule: a letter or ``_`` first)."""

GEMINI_PARAMETER_NAME_PATTERN = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
"""Parameter (property) names of ``FunctionDeclaration.parameters``."""

_INVALID_PARAMETER = re.compile(r"[^a-zA-Z0-9_]")

_TYPES = {
    "string": "STRING",
    "integer": "INTEGER",
    "number": "NUMBER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}
_FORMATS = {
    "string": frozenset({"date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}
_KEYWORDS_OF = {  # JSON Schema keywords that apply to one instance type only
    "string": frozenset(
        {"minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"}
    ),
    "number": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"}
    ),
    "array": frozenset(
        {
            "items",
            "prefixItems",
            "additionalItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
            "minContains",
            "maxContains",
            "unevaluatedItems",
        }
    ),
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "propertyNames",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependentSchemas",
            "dependencies",
            "unevaluatedProperties",
        }
    ),
}
_KEYWORDS_OF["integer"] = _KEYWORDS_OF["number"]
_TYPE_KEYWORDS = frozenset().union(*_KEYWORDS_OF.values())
_EMITTED = {  # what the Gemini subset keeps as it is, per type
    "string": frozenset({"minLength", "maxLength", "pattern"}),
    "number": frozenset(),
    "integer": frozenset(),
    "array": frozenset({"minItems", "maxItems"}),
    "object": frozenset({"minProperties", "maxProperties"}),
    "boolean": frozenset(),
}
_HANDLED_APART = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "properties",
        "required",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)
_SILENT = frozenset(
    {
        "title",
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "readOnly",
        "writeOnly",
        "examples",
        "deprecated",
        "contentEncoding",
        "contentMediaType",
    }
)


def gemini_function_name(name: str) -> str:
    """The Gemini function name of the registered tool ``name``.

    The OpenAI exported name (:func:`~sagents.tool.naming.to_exported_name`) when Gemini
    accepts it, which is almost always; otherwise (it starts with a digit or ``-``) that name
    behind ``_``, cut and given a hash of the registered name when it would pass 64 characters.
    Deterministic; :func:`parse_gemini_function_call` maps it back.
    """
    exported = to_exported_name(name)
    if GEMINI_NAME_PATTERN.match(exported):
        return exported
    candidate = f"_{exported}"
    if len(candidate) <= 64:
        return candidate
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"_{exported[:54]}_{digest}"


def gemini_schema(schema: Mapping[str, Any], *, strict: bool = False) -> dict[str, Any] | None:
    """``schema`` as Gemini ``parameters`` (rules: module docstring).

    Args:
        schema: A tool's input schema (any JSON Schema object).
        strict: Start from OpenAI's strict rewrite (every property required, optional ones
            nullable): pass ``strict=True`` to ``run_tool`` for the calls.

    Returns:
        The ``parameters`` schema, or None for a tool without parameters.

    Raises:
        SchemaExportError: when the tool cannot be declared without changing its meaning.
    """
    document = _document(schema)
    try:
        # The faithful declaration first, also in strict mode: what Gemini cannot declare is
        # refused whatever the strict rewrite would make of it (it may close an open map).
        declared = _Writer().root(document)
        return _Writer().root(strict_schema(document).schema) if strict else declared
    except RecursionError:
        raise SchemaExportError(
            "the schema is nested too deeply to export", details={"path": ""}
        ) from None


def to_gemini_function_declaration(
    spec: ToolSpec, *, strict: bool = False, name: str | None = None
) -> dict[str, Any]:
    """The Gemini ``FunctionDeclaration`` for ``spec`` (REST field names).

    Put the declarations of a request in one tool: ``{"functionDeclarations": [...]}``.

    Args:
        spec: The tool.
        strict: See :func:`gemini_schema`.
        name: The declared name; :func:`gemini_function_name` of ``spec.name`` by default.

    Returns:
        ``{"name", "description"[, "parameters"]}``.

    Raises:
        SchemaExportError: see :func:`gemini_schema`.
    """
    declaration: dict[str, Any] = {
        "name": name if name is not None else gemini_function_name(spec.name),
        "description": description_with_examples(spec),
    }
    parameters = gemini_schema(spec.input_schema, strict=strict)
    if parameters is not None:
        declaration["parameters"] = parameters
    return declaration


def parse_gemini_function_call(part: Any, provider: ToolProvider | None = None) -> ModelToolCall:
    """A Gemini ``functionCall`` as a call to pass to ``run_tool``.

    Args:
        part: A response ``Part`` holding ``functionCall`` (or ``function_call``), or the
            ``FunctionCall`` itself: a JSON dict or a ``google.genai.types`` object.
        provider: Maps a Gemini function name back to the registered name, and renamed
            parameters back to their own names (:func:`restore_gemini_arguments`); without
            it both are kept as the model sent them.

    Returns:
        The call; ``tool_call_id`` is the call's ``id`` (None when the model gave none:
        answer by name then, in the order of the calls).

    Raises:
        ValueError: when ``part`` holds no function call with a name.
    """
    call = field_of(part, "functionCall", "function_call")
    call = part if call is None else call
    name = field_of(call, "name")
    if not isinstance(name, str) or not name:
        raise ValueError("the part holds no Gemini functionCall with a name")
    args = field_of(call, "args")
    call_id = field_of(call, "id")
    registered = resolve_call_name(name, provider, gemini_function_name)
    if provider is not None and isinstance(args, Mapping) and provider.has_tool(registered):
        args = restore_gemini_arguments(provider.get_tool_spec(registered).input_schema, args)
    return ModelToolCall(
        name=registered,
        arguments=call_arguments(args),
        tool_call_id=call_id if isinstance(call_id, str) and call_id else None,
        sent_name=name,
    )


def parse_gemini_function_calls(
    parts: Iterable[Any], provider: ToolProvider | None = None
) -> list[ModelToolCall]:
    """Every function call among ``parts``, in order (parts without one are skipped).

    ``parts`` may be a candidate's ``content.parts`` or the SDK's ``response.function_calls``.
    """
    calls = []
    for part in parts:
        inner = field_of(part, "functionCall", "function_call")
        if inner is not None or isinstance(field_of(part, "name"), str):
            calls.append(parse_gemini_function_call(part, provider))
    return calls


def gemini_function_response(
    call: ModelToolCall, result: ToolResult, *, max_tokens: int | None = None
) -> dict[str, Any]:
    """The ``functionResponse`` part that answers ``call`` with ``result``.

    The response object holds the model-facing text of the result
    (:meth:`~sagents.core._result.ToolResult.to_tool_message`) under ``output``, or under
    ``error`` for a failed call, as the Gemini API asks ("Use 'output' key to specify function
    output and 'error' key to specify error details").

    Returns:
        ``{"functionResponse": {"name"[, "id"], "response": {"output" | "error": text}}}``.
    """
    key = "error" if result.is_error else "output"
    response: dict[str, Any] = {
        "name": call.sent_name or call.name,
        "response": {key: result.to_tool_message(max_tokens)},
    }
    if call.tool_call_id:
        response["id"] = call.tool_call_id
    return {"functionResponse": response}


class _Writer:
    """Rewrites a ref-free, allOf-free document into Gemini's subset."""

    def __init__(self) -> None:
        self.renames: dict[int, dict[str, str]] = {}  # id(OBJECT node) -> declared -> original
        self._keep: list[Any] = []  # keeps the recorded nodes alive, so their ids stay unique

    def root(self, document: Mapping[str, Any]) -> dict[str, Any] | None:
        shaping = ("properties", "patternProperties", "anyOf", "oneOf", "required")
        extra = document.get("additionalProperties", False)
        if extra is False and not any(document.get(k) for k in shaping):
            return None  # no parameters: the API refuses an OBJECT without properties
        declared = self.node(document, "", root=True)
        if declared.get("type") != "OBJECT":  # a union of argument shapes
            raise self.refuse("is an anyOf of argument objects at its root", "")
        return declared

    def refuse(self, message: str, path: str) -> SchemaExportError:
        return SchemaExportError(
            f"the schema at {path or '/'!r} {message}, which Gemini cannot declare",
            hint="give it a concrete shape, or call this tool through another API",
            details={"path": path},
        )

    def node(self, node: Any, path: str, *, root: bool = False) -> dict[str, Any]:
        if node is False:
            raise self.refuse("accepts no value at all", path)
        if not isinstance(node, Mapping) or not node:
            raise self.refuse("accepts a value of any type", path)
        node = dict(node)
        nullable = False
        if "oneOf" in node or "anyOf" in node:
            return self.union(node, path)
        types = _types_of(node)
        if types is None:
            raise self.refuse("accepts a value of any type", path)
        if "null" in types:
            nullable = True
            types = [t for t in types if t != "null"]
        if not types:
            raise self.refuse("accepts only null", path)
        if len(types) > 1:
            rest = {k: v for k, v in node.items() if k not in ("description", "title")}
            branches = [{**rest, "type": t} for t in types]
            return self.union({"anyOf": branches, **_words(node)}, path, nullable=nullable)
        return self.typed(node, types[0], path, nullable=nullable, root=root)

    def union(self, node: dict[str, Any], path: str, *, nullable: bool = False) -> dict[str, Any]:
        if "oneOf" in node and "anyOf" in node:
            raise self.refuse("has both anyOf and oneOf", path)
        key = "oneOf" if "oneOf" in node else "anyOf"
        branches = node.pop(key)
        if not isinstance(branches, list) or not branches:
            raise self.refuse(f"has an empty {key}", path)
        words = _words(node)
        siblings = {k: v for k, v in node.items() if k not in words and k != "default"}
        pending: list[tuple[str, Any]] = []
        for i, branch in enumerate(branches):
            at = f"{path}/{key}/{i}"
            if siblings:  # A and (B or C) is (A and B) or (A and C)
                branch = _conjunction(siblings, branch, at)
            if _is_null(branch):
                nullable = True
            else:
                pending.append((at, branch))
        if not pending:
            raise self.refuse("accepts only null", path)
        if len(pending) == 1 and "description" in words and isinstance(pending[0][1], Mapping):
            at, branch = pending[0]  # the node's words, then what the branch folds into them
            pending = [(at, {**branch, "description": words["description"]})]
        written = [self.node(branch, at) for at, branch in pending]
        if nullable:
            for one in written:
                one["nullable"] = True
        out = written[0] if len(written) == 1 else {"anyOf": written}
        if len(written) > 1 and "description" in words:
            out["description"] = words["description"]
        default = node.get("default")
        if default is not None and len(written) == 1 and _fits(default, _kind_of(out)):
            out["default"] = default
        return out

    def typed(
        self, node: dict[str, Any], kind: str, path: str, *, nullable: bool, root: bool = False
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"type": _TYPES[kind]}
        notes: dict[str, Any] = {}
        values = _values_of(node)
        if values is not None:
            if None in values:
                out["nullable"] = True
            fitting = [v for v in values if v is not None and _fits(v, kind)]
            if kind == "string" and fitting:
                out["enum"] = fitting  # (type and enum) keeps the values of this type
            elif any(v is not None for v in values):
                notes["enum" if "enum" in node else "const"] = node.get("enum", node.get("const"))
        if nullable:
            out["nullable"] = True
        own = _KEYWORDS_OF.get(kind, frozenset())
        others = _TYPE_KEYWORDS - own
        for key, value in node.items():
            if key in ("type", "enum", "const", "description", "nullable") or key in _SILENT:
                continue
            if key == "default":
                if value is not None and _fits(value, kind):
                    out["default"] = value  # a default of another type says nothing here
            elif key in _EMITTED[kind] or (key == "format" and value in _FORMATS.get(kind, ())):
                out[key] = value
            elif key in own and key in _HANDLED_APART:
                continue
            elif key == "additionalProperties" and value is False:
                continue  # closed objects have no counterpart; run_tool checks the original
            elif key in others:
                continue  # applies to another instance type only
            else:
                notes[key] = value
        if kind in ("number", "integer"):
            _bounds(node, out, notes)
        if kind == "array":
            self.array(node, out, path, notes)
        elif kind == "object":
            self.object(node, out, path, notes, root=root)
        description = node.get("description")
        if notes:
            text = "; ".join(
                f"{k}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}"
                for k, v in notes.items()
            )
            description = f"{description} ({text})" if description else f"({text})"
        if description:
            out["description"] = description
        return out

    def array(
        self, node: Mapping[str, Any], out: dict[str, Any], path: str, notes: dict[str, Any]
    ) -> None:
        prefix, tail = node.get("prefixItems"), node.get("items")
        if isinstance(tail, list):  # draft-07 tuple form
            prefix, tail = tail, node.get("additionalItems")
        if isinstance(prefix, list) and prefix and fixed_length(node, len(prefix)):
            tail = False  # pydantic's tuple[int, str]: maxItems leaves no room past the prefix
        if isinstance(prefix, list) and prefix:
            members = [*prefix]
            if isinstance(tail, Mapping):
                members.append(tail)
            elif tail is None or tail is True:
                raise self.refuse("is a tuple whose extra items may be of any type", path)
            else:
                out["maxItems"] = min(len(prefix), out.get("maxItems", len(prefix)))
            notes["prefixItems"] = prefix  # the item types in their order
            items: Any = members[0] if len(members) == 1 else {"anyOf": members}
            out["items"] = self.node(items, f"{path}/prefixItems")
            return
        if not isinstance(tail, Mapping) or not tail:
            raise self.refuse("is an array whose items may be of any type", path)
        out["items"] = self.node(tail, f"{path}/items")

    def object(
        self,
        node: Mapping[str, Any],
        out: dict[str, Any],
        path: str,
        notes: dict[str, Any],
        *,
        root: bool,
    ) -> None:
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        if not properties:
            if root:
                raise self.refuse("is an open map of arguments", path)
            raise self.refuse("is an object with no fixed properties", path)
        if extra is not None and extra is not False:
            notes["additionalProperties"] = extra
        taken = {n for n in properties if GEMINI_PARAMETER_NAME_PATTERN.match(n)}
        declared_as: dict[str, str] = {}
        written: dict[str, Any] = {}
        for name, sub in properties.items():
            at = f"{path}/properties/{escape_pointer(name)}"
            declared = name
            if name not in taken:
                declared = gemini_parameter_name(name, taken)
                if declared in taken:
                    raise self.refuse(f"has the property {name!r}, whose Gemini name is taken", at)
                taken.add(declared)
            child = self.node(sub, at)
            if declared != name:  # the model still learns the parameter's real name
                note = f"(parameter {json.dumps(name, ensure_ascii=False)})"
                words = child.get("description")
                child["description"] = f"{words} {note}" if words else note
            declared_as[name] = declared
            written[declared] = child
        out["properties"] = written
        required = [declared_as[r] for r in node.get("required") or () if r in declared_as]
        if required:
            out["required"] = required
        missing = [r for r in node.get("required") or () if r not in declared_as]
        if missing:
            notes["required"] = missing
        renamed = {d: n for n, d in declared_as.items() if d != n}
        if renamed:
            self.renames[id(out)] = renamed
            self._keep.append(out)


def gemini_parameter_name(name: str, taken: Iterable[str] = ()) -> str:
    """The declared name of a property whose own name Gemini refuses.

    Invalid characters become ``_`` (``max-results`` -> ``max_results``), a leading digit gets
    a ``_`` before it, a name with no ASCII letter or digit becomes ``p``; when that name is
    in ``taken`` (another property of the same object) or too long, 8 hex digits of the
    original name's SHA-256 are appended. Deterministic for a given object, so
    :func:`parse_gemini_function_call` maps the arguments back.
    """
    stem = _INVALID_PARAMETER.sub("_", name)
    if not re.search(r"[a-zA-Z0-9]", stem):
        stem = "p"
    if stem[0].isdigit():
        stem = f"_{stem}"
    if stem not in set(taken) and len(stem) <= 64:
        return stem
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{stem[:55]}_{digest}"


def restore_gemini_arguments(schema: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments a Gemini model sent, with renamed parameters under their own names again.

    Args:
        schema: The tool's input schema (as registered).
        args: The ``functionCall.args``.

    Returns:
        A new dict (unchanged when no parameter was renamed, or the schema cannot be declared).
    """
    return _rename(schema, args, back=True)


def declare_gemini_arguments(schema: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`restore_gemini_arguments`: arguments under their declared names
    (to replay a call in a Gemini history)."""
    return _rename(schema, args, back=False)


def _rename(schema: Mapping[str, Any], args: Mapping[str, Any], *, back: bool) -> dict[str, Any]:
    writer = _Writer()
    try:
        declared = writer.root(_document(schema))
    except (SchemaExportError, RecursionError):
        return dict(args)
    if declared is None or not writer.renames:
        return dict(args)
    maps = writer.renames
    if not back:
        maps = {key: {o: d for d, o in names.items()} for key, names in maps.items()}
    renamed = _walk(dict(args), declared, maps, back=back)
    return renamed if isinstance(renamed, dict) else dict(args)


def _walk(value: Any, declared: Any, maps: Mapping[int, Mapping[str, str]], *, back: bool) -> Any:
    """Rename the keys of ``value`` along the declared schema (``maps``: id(node) -> old -> new)."""
    if not isinstance(declared, Mapping):
        return value
    if isinstance(declared.get("anyOf"), list):
        for branch in declared["anyOf"]:
            if _holds(branch, value, maps.get(id(branch), {}), back=back):
                return _walk(value, branch, maps, back=back)
        return value
    if isinstance(value, dict) and declared.get("type") == "OBJECT":
        names = maps.get(id(declared), {})
        properties = declared.get("properties") or {}
        out = {}
        for key, item in value.items():
            new = names.get(key, key)
            sub = properties.get(key if back else new)
            out[new] = _walk(item, sub, maps, back=back)
        return out
    if isinstance(value, list) and declared.get("type") == "ARRAY":
        return [_walk(v, declared.get("items"), maps, back=back) for v in value]
    return value


def _holds(branch: Any, value: Any, names: Mapping[str, str], *, back: bool) -> bool:
    """True when ``value`` can be an instance of the declared object or array ``branch``."""
    if not isinstance(branch, Mapping):
        return False
    if isinstance(value, dict):
        keys = set(value) if back else {names.get(k, k) for k in value}
        return branch.get("type") == "OBJECT" and keys <= set(branch.get("properties") or ())
    return isinstance(value, list) and branch.get("type") == "ARRAY"


def _document(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The faithful document, ``$ref`` inlined and unions distributed (both exact)."""
    inlined = inline_schema(faithful_schema(schema), target="Gemini")
    distributed: dict[str, Any] = distribute_unions(inlined, target="Gemini")
    return distributed


def _bounds(node: Mapping[str, Any], out: dict[str, Any], notes: dict[str, Any]) -> None:
    """``minimum``/``maximum``; an exclusive bound becomes the inclusive one (a superset) and
    is written into the description."""
    for bound, exclusive, tighter in (
        ("minimum", "exclusiveMinimum", max),
        ("maximum", "exclusiveMaximum", min),
    ):
        values = [
            node[k]
            for k in (bound, exclusive)
            if isinstance(node.get(k), int | float) and not isinstance(node.get(k), bool)
        ]
        if values:
            out[bound] = tighter(values)
        if exclusive in node:
            notes[exclusive] = node[exclusive]


def _types_of(node: Mapping[str, Any]) -> list[str] | None:
    declared = node.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list) and declared:
        return [t for t in declared if isinstance(t, str)]
    if any(k in node for k in ("properties", "required", "additionalProperties")):
        return ["object"]  # object keywords without a type: read as an object
    if any(k in node for k in ("items", "prefixItems")):
        return ["array"]
    values = _values_of(node)
    if values:
        kinds = list(dict.fromkeys(json_type(v) for v in values))
        if "integer" in kinds and "number" in kinds:
            kinds.remove("integer")
        return [k for k in kinds if k in _TYPES or k == "null"] or None
    return None


def _values_of(node: Mapping[str, Any]) -> list[Any] | None:
    if "const" in node:
        return [node["const"]]
    enum = node.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _kind_of(declared: Mapping[str, Any]) -> str:
    """The JSON Schema type name of a written Gemini node ("" for an ``anyOf``)."""
    return str(declared.get("type", "")).lower()


def _fits(value: Any, kind: str) -> bool:
    found = json_type(value)
    return found == kind or (kind == "number" and found == "integer")


def _words(node: Mapping[str, Any]) -> dict[str, Any]:
    return {k: node[k] for k in ("description", "title") if k in node}


def _is_null(branch: Any) -> bool:
    if not isinstance(branch, Mapping):
        return False
    types = branch.get("type")
    rest = {k for k in branch if k not in ("type", "description", "title")}
    return (types == "null" or types == ["null"]) and not rest


def _conjunction(siblings: Mapping[str, Any], branch: Any, path: str) -> Any:
    return merge_schemas(siblings, branch, path=path, target="Gemini")

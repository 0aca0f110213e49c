"""Export tools as OpenAI function-calling tools (Chat Completions shape; issue 2, §3).

Two modes, both working on ANY JSON Schema dict (local tools' schemas and MCP upstream schemas)
and both computed on a deep copy, so the input is never changed, not even by a rewrite that fails
half-way:

* **Faithful** (:func:`faithful_schema`, the default): accepts exactly the inputs the original
  accepts. The root is ``type: object`` (a root ``$ref`` is inlined); every ``$ref`` must resolve
  inside the exported document (``$defs``/``definitions`` are kept where they are); an external
  or dangling ``$ref`` fails with :class:`~sagents.errors.SchemaExportError` rather than being
  guessed. An array without ``items`` gets ``items: {}`` (same meaning; some providers reject the
  bare form).
* **Strict** (:func:`strict_schema`): OpenAI's strict subset ("Structured Outputs", section
  "Supported schemas", https://platform.openai.com/docs/guides/structured-outputs). Every
  property is required; a property that was optional is made nullable and remembered, so that
  :func:`strict_nulls_to_absent` turns the ``null`` a model sends back into "absent" before
  validation and the call (recursively, in nested objects, arrays, ``anyOf`` branches and
  ``$defs``). Every object gets ``additionalProperties: false``. Keywords outside the subset
  (``default``, ``minLength``, ``uniqueItems``, ``not``, ...) are removed and folded into the
  ``description``; ``oneOf`` becomes ``anyOf``; a single-member ``allOf`` is merged; tuples
  (``prefixItems``) become arrays of the union of their item types with fixed length. ``$ref``
  and ``$defs`` are kept (the subset allows them, recursion included), and ``$defs`` are
  rewritten once each, so recursive schemas never recurse forever.

  A strict schema may accept more than the original (dropped keywords, closed objects aside):
  arguments must still be validated against the original schema after
  :func:`strict_nulls_to_absent` (``ToolManager.run_tool`` does). Inputs the original accepts
  are accepted by the strict schema in their strict form (absent optional properties sent as
  ``null``). What strict mode cannot express fails with :class:`~sagents.errors.SchemaExportError`:
  a value of any type (``{}``, ``true``), an open map (``dict[str, int]``: an object with no
  fixed properties), ``allOf`` with several members; export such a tool with ``strict=False``.
  One case is lossy by design (the issue's rule): an optional property whose own schema accepts
  ``null`` cannot be sent as an explicit ``null`` in strict mode, it becomes absent.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator

from sagents.core.spec import ToolSpec
from sagents.errors import SchemaExportError
from sagents.tool.json_schema import (
    SCHEMA_KEYWORDS,
    SCHEMA_LIST_KEYWORDS,
    SCHEMA_MAP_KEYWORDS,
    deep_copy_schema,
    map_subschemas,
    resolve_local_ref,
)
from sagents.tool.naming import to_exported_name

__all__ = [
    "STRICT_FORMATS",
    "STRICT_KEYWORDS",
    "StrictSchema",
    "faithful_schema",
    "strict_absent_to_nulls",
    "strict_nulls_to_absent",
    "strict_schema",
    "to_openai_tool",
]

STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
"""Keywords OpenAI's strict mode supports ("Supported schemas" in the Structured Outputs guide)."""

STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
"""String formats strict mode supports; other formats are folded into the description."""

_SILENTLY_DROPPED = frozenset({"title", "$schema", "$id", "$comment", "readOnly", "writeOnly"})
_MAX_REF_HOPS = 64  # a chain of $ref to $ref longer than this is a cycle


def to_openai_tool(
    spec: ToolSpec, *, strict: bool = False, name: str | None = None
) -> dict[str, Any]:
    """The Chat Completions tool ``{"type": "function", "function": {...}}`` for ``spec``.

    Args:
        spec: The tool (its input schema already excludes what the host injects).
        strict: Export OpenAI's strict subset and add ``"strict": true``.
        name: The exported name; :func:`~sagents.tool.naming.to_exported_name` of
            ``spec.name`` by default (pass a :class:`~sagents.tool.naming.NameMap`'s name to
            have collisions checked).

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"[, "strict"]}}``.

    Raises:
        SchemaExportError: when the schema cannot be exported in the asked mode.
    """
    function: dict[str, Any] = {
        "name": name if name is not None else to_exported_name(spec.name),
        "description": spec.description,
    }
    if strict:
        function["parameters"] = strict_schema(spec.input_schema).schema
        function["strict"] = True
    else:
        function["parameters"] = faithful_schema(spec.input_schema)
    return {"type": "function", "function": function}


def faithful_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A self-contained copy of ``schema`` that accepts exactly the same inputs.

    Raises:
        SchemaExportError: when the root cannot be an object, or a ``$ref`` is external or
            does not resolve inside the document (``details["path"]`` says where).
    """
    if not isinstance(schema, Mapping):
        raise SchemaExportError("a tool's input schema must be a JSON object", details={"path": ""})
    document = deep_copy_schema(schema)
    document = _inline_root_ref(document)
    root_type = document.get("type")
    if root_type is None:
        document["type"] = "object"
    elif root_type != "object":
        if isinstance(root_type, list) and "object" in root_type:
            document["type"] = "object"  # tool arguments are always an object
        else:
            raise SchemaExportError(
                f"a tool's input schema must have type 'object' at its root, not {root_type!r}",
                details={"path": ""},
            )
    document = _add_missing_items(document)
    _check_refs(document, document, "")
    return dict(document)


def _inline_root_ref(document: dict[str, Any]) -> dict[str, Any]:
    for _ in range(_MAX_REF_HOPS):
        ref = document.get("$ref")
        if not isinstance(ref, str):
            return document
        target = _resolve(document, ref, "")
        merged = {k: v for k, v in document.items() if k != "$ref"}
        for key, value in deep_copy_schema({"t": target})["t"].items():
            if key in ("$defs", "definitions") and key in merged:
                merged[key] = {**value, **merged[key]}
            else:
                merged.setdefault(key, value)
        document = merged
    raise SchemaExportError("the root $ref chain is circular", details={"path": ""})


def _add_missing_items(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = map_subschemas(node, _add_missing_items)
    types_ = out.get("type")
    is_array = types_ == "array" or (isinstance(types_, list) and "array" in types_)
    if is_array and "items" not in out and "prefixItems" not in out:
        out["items"] = {}
    return out


def _check_refs(document: dict[str, Any], node: Any, path: str) -> None:
    if not isinstance(node, Mapping):
        return
    ref = node.get("$ref")
    if isinstance(ref, str):
        _resolve(document, ref, path)
    for key, child_path, child in _children(node, path):
        del key
        _check_refs(document, child, child_path)


def _resolve(document: Mapping[str, Any], ref: str, path: str) -> Any:
    if not ref.startswith("#"):
        raise SchemaExportError(
            f"$ref {ref!r} at {path or '/'!r} points outside the schema",
            hint="inline the referenced schema; sagents does not fetch external schemas",
            details={"path": path, "ref": ref},
        )
    try:
        return resolve_local_ref(document, ref)
    except KeyError:
        raise SchemaExportError(
            f"$ref {ref!r} at {path or '/'!r} does not resolve inside the schema",
            hint="add the missing definition to $defs",
            details={"path": path, "ref": ref},
        ) from None


def _children(node: Mapping[str, Any], path: str) -> list[tuple[str, str, Any]]:
    """Each direct subschema of ``node`` as ``(keyword, JSON Pointer, subschema)``."""
    found: list[tuple[str, str, Any]] = []

    def collect(sub: Any, pointer: str, keyword: str) -> Any:
        found.append((keyword, pointer, sub))
        return sub

    for key, value in node.items():
        base = f"{path}/{_escape(key)}"
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping) and _is_schema_list(key):
                    collect(item, f"{base}/{i}", key)
        elif isinstance(value, Mapping) and _is_schema_map(key):
            for name, sub in value.items():
                if isinstance(sub, Mapping):
                    collect(sub, f"{base}/{_escape(name)}", key)
        elif isinstance(value, Mapping) and _is_schema(key):
            collect(value, base, key)
    return found


def _is_schema(key: str) -> bool:
    return key in SCHEMA_KEYWORDS


def _is_schema_list(key: str) -> bool:
    return key in SCHEMA_LIST_KEYWORDS or key in ("items", "additionalItems")


def _is_schema_map(key: str) -> bool:
    return key in SCHEMA_MAP_KEYWORDS or key == "dependencies"


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True, kw_only=True)
class StrictSchema:
    """A schema rewritten to OpenAI's strict subset, with what is needed to read answers back.

    Attributes:
        schema: The strict JSON Schema (send it as ``parameters`` with ``"strict": true``).
        optional: JSON Pointer of each object schema inside :attr:`schema` -> the names of its
            properties that were optional in the original (their ``null`` means "absent").
    """

    schema: Mapping[str, Any]
    optional: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @functools.cached_property
    def validator(self) -> Validator:
        """A JSON Schema 2020-12 validator of :attr:`schema` (its ``$ref`` resolve locally)."""
        return Draft202012Validator(dict(self.schema))


def strict_schema(schema: Mapping[str, Any]) -> StrictSchema:
    """Rewrite ``schema`` to OpenAI's strict subset (see the module docstring for the rules).

    Raises:
        SchemaExportError: when the schema uses what strict mode cannot express (a value of any
            type, an open map, a multi-member ``allOf``) or fails :func:`faithful_schema`;
            ``details["path"]`` is the JSON Pointer of the node. The input is unchanged.
    """
    rewriter = _StrictRewriter()
    document = rewriter.rewrite(faithful_schema(schema), "")
    optional: dict[str, frozenset[str]] = {}
    _collect_pointers(document, "", rewriter.optional, optional)
    return StrictSchema(schema=document, optional=optional)


class _StrictRewriter:
    def __init__(self) -> None:
        self.optional: dict[int, frozenset[str]] = {}  # id(output object node) -> names
        self._keep: list[Any] = []  # keeps recorded nodes alive, so ids stay unique

    def rewrite(self, node: Any, path: str) -> dict[str, Any]:
        if not isinstance(node, Mapping) or not _constrains_type(node):
            raise SchemaExportError(
                f"the schema at {path or '/'!r} accepts a value of any type; "
                "OpenAI strict mode needs a type",
                hint="give the parameter a concrete type, or export this tool with strict=False",
                details={"path": path},
            )
        node = self._merge_all_of(dict(node), path)
        if "oneOf" in node:
            node["anyOf"] = [*node.pop("oneOf"), *node.get("anyOf", [])]
        notes: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _SILENTLY_DROPPED:
                continue
            if key == "format" and value not in STRICT_FORMATS:
                notes[key] = value
            elif key not in STRICT_KEYWORDS:
                if key not in ("prefixItems", "additionalItems"):
                    notes[key] = value
            else:
                out[key] = value
        for defs_key in ("$defs", "definitions"):
            if isinstance(out.get(defs_key), Mapping):
                out[defs_key] = {
                    n: self.rewrite(s, f"{path}/{defs_key}/{_escape(n)}")
                    for n, s in out[defs_key].items()
                }
        if isinstance(out.get("anyOf"), list):
            out["anyOf"] = [
                self.rewrite(s, f"{path}/anyOf/{i}") for i, s in enumerate(out["anyOf"])
            ]
        if _has_type(out, "array") or "items" in node or "prefixItems" in node:
            self._array(node, out, path)
        if _has_type(out, "object") or "properties" in out:
            self._object(node, out, path)
        elif "$ref" in out:
            out = {k: v for k, v in out.items() if k in ("$ref", "description", "$defs")}
        if notes:
            _fold(out, notes)
        return out

    def _merge_all_of(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        all_of = node.pop("allOf", None)
        if all_of is None:
            return node
        if not isinstance(all_of, list) or len(all_of) != 1 or not isinstance(all_of[0], Mapping):
            raise SchemaExportError(
                f"the schema at {path or '/'!r} uses allOf with several members, "
                "which OpenAI strict mode cannot express",
                hint="export this tool with strict=False",
                details={"path": path},
            )
        for key, value in all_of[0].items():
            if key in node and node[key] != value and key not in ("description", "title"):
                raise SchemaExportError(
                    f"the schema at {path or '/'!r} has allOf conflicting on {key!r}",
                    details={"path": path},
                )
            node.setdefault(key, value)
        return node

    def _array(self, node: Mapping[str, Any], out: dict[str, Any], path: str) -> None:
        prefix, tail = node.get("prefixItems"), node.get("items")
        if isinstance(tail, list):  # draft-07 tuple form
            prefix, tail = tail, node.get("additionalItems")
        if not (isinstance(prefix, list) and prefix):
            out["items"] = self.rewrite(tail if tail is not None else {}, f"{path}/items")
            return
        # A tuple: an array of the union of its item types, its length kept where it was fixed.
        members: list[Any] = []
        for item in [*prefix, *([tail] if isinstance(tail, Mapping) and tail else [])]:
            if item not in members:
                members.append(item)
        if tail is False:
            out["maxItems"] = min(len(prefix), out.get("maxItems", len(prefix)))
        items = members[0] if len(members) == 1 else {"anyOf": members}
        out["items"] = self.rewrite(items, f"{path}/prefixItems")

    def _object(self, node: Mapping[str, Any], out: dict[str, Any], path: str) -> None:
        properties = out.get("properties") or {}
        extra = node.get("additionalProperties")
        # The root holds the tool's arguments: no properties there means "no arguments", and an
        # explicit empty ``properties`` is read the same way. Elsewhere it is an open map.
        is_map = extra is not False and not (path == "" or "properties" in node)
        if not properties and (is_map or node.get("patternProperties")):
            raise SchemaExportError(
                f"the object at {path or '/'!r} is an open map (no fixed properties), "
                "which OpenAI strict mode cannot express",
                hint="use a model or TypedDict with named fields, or export with strict=False",
                details={"path": path},
            )
        required = set(node.get("required") or ())
        new_properties: dict[str, Any] = {}
        optional: set[str] = set()
        for name, sub in properties.items():
            child = self.rewrite(sub, f"{path}/properties/{_escape(name)}")
            if name not in required:
                optional.add(name)
                child = _nullable(child)
            new_properties[name] = child
        out["properties"] = new_properties
        out["required"] = list(new_properties)
        out["additionalProperties"] = False
        if optional:
            self.optional[id(out)] = frozenset(optional)
            self._keep.append(out)


def _constrains_type(node: Mapping[str, Any]) -> bool:
    return (
        any(
            key in node
            for key in ("type", "properties", "items", "enum", "const", "anyOf", "oneOf", "allOf")
        )
        or "$ref" in node
    )


def _has_type(node: Mapping[str, Any], name: str) -> bool:
    types_ = node.get("type")
    return types_ == name or (isinstance(types_, list) and name in types_)


def _accepts_null(node: Mapping[str, Any]) -> bool:
    if _has_type(node, "null") or node.get("const", 0) is None:
        return True
    if isinstance(node.get("enum"), list) and None in node["enum"]:
        return True
    return any(isinstance(b, Mapping) and _accepts_null(b) for b in node.get("anyOf", ()))


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """Make ``node`` accept ``null`` too, keeping the same dict object for the non-null part."""
    if _accepts_null(node):
        return node
    types_ = node.get("type")
    simple = "$ref" not in node and "anyOf" not in node and "const" not in node
    if isinstance(types_, str | list) and simple:
        node["type"] = [*(types_ if isinstance(types_, list) else [types_]), "null"]
        if isinstance(node.get("enum"), list):
            node["enum"] = [*node["enum"], None]
        return node
    if list(node) == ["anyOf"] or set(node) == {"anyOf", "description"}:
        node["anyOf"] = [*node["anyOf"], {"type": "null"}]
        return node
    description = node.pop("description", None)
    wrapped: dict[str, Any] = {"anyOf": [node, {"type": "null"}]}
    if description is not None:
        wrapped["description"] = description
    return wrapped


def _fold(out: dict[str, Any], notes: Mapping[str, Any]) -> None:
    text = "; ".join(
        f"{key}: {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
        for key, value in notes.items()
    )
    description = out.get("description")
    out["description"] = f"{description} ({text})" if description else f"({text})"


def _collect_pointers(
    node: Any, path: str, by_id: Mapping[int, frozenset[str]], into: dict[str, frozenset[str]]
) -> None:
    if not isinstance(node, Mapping):
        return
    names = by_id.get(id(node))
    if names:
        into[path] = names
    for _, child_path, child in _children(node, path):
        _collect_pointers(child, child_path, by_id, into)


def strict_nulls_to_absent(strict: StrictSchema, args: Mapping[str, Any]) -> dict[str, Any]:
    """Turn the arguments of a strict call back into the original's form.

    A ``null`` sent for a property that was optional in the original is removed ("absent"),
    recursively in nested objects, arrays, ``anyOf`` branches and ``$defs``. Everything else is
    kept. ``args`` is not changed.

    Args:
        strict: The :class:`StrictSchema` the tool was exported with.
        args: The arguments the model sent.

    Returns:
        New arguments, to validate against the original schema and pass to the call.
    """
    result = _walk(strict, dict(args), strict.schema, "", to_absent=True)
    return result if isinstance(result, dict) else dict(args)


def strict_absent_to_nulls(strict: StrictSchema, args: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`strict_nulls_to_absent`: original arguments in their strict form.

    Each absent optional property is sent as ``null`` (for replaying history in strict mode and
    for checking the rewrite). ``args`` is not changed.
    """
    result = _walk(strict, dict(args), strict.schema, "", to_absent=False)
    return result if isinstance(result, dict) else dict(args)


def _walk(strict: StrictSchema, value: Any, node: Any, path: str, *, to_absent: bool) -> Any:
    for _ in range(_MAX_REF_HOPS):
        if not isinstance(node, Mapping) or not isinstance(node.get("$ref"), str):
            break
        ref = node["$ref"]
        try:
            node = resolve_local_ref(strict.schema, ref)
        except KeyError:
            return value
        path = ref[1:]
    if not isinstance(node, Mapping):
        return value
    if isinstance(value, dict) and isinstance(node.get("properties"), Mapping):
        optional = strict.optional.get(path, frozenset())
        properties = node["properties"]
        out: dict[str, Any] = {}
        for key, item in value.items():
            if to_absent and key in optional and item is None:
                continue
            sub = properties.get(key)
            sub_path = f"{path}/properties/{_escape(key)}"
            out[key] = _walk(strict, item, sub, sub_path, to_absent=to_absent) if sub else item
        if not to_absent:
            for key in properties:
                if key in optional and key not in out:
                    out[key] = None
        value = out
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        value = [
            _walk(strict, item, node["items"], f"{path}/items", to_absent=to_absent)
            for item in value
        ]
    branches = node.get("anyOf")
    if isinstance(branches, list):
        for i, branch in enumerate(branches):
            candidate = _walk(strict, value, branch, f"{path}/anyOf/{i}", to_absent=to_absent)
            checked = value if to_absent else candidate
            if strict.validator.evolve(schema=branch).is_valid(checked):
                return candidate
    return value

"""Strict export: OpenAI's strict subset of JSON Schema, and reading strict answers back.

OpenAI "Structured Outputs", section "Supported schemas"
(https://platform.openai.com/docs/guides/structured-outputs). See :mod:`sagents.tool.openai_export`
for the rules; this module implements them on a deep copy made by
:func:`~sagents.tool.export_faithful.faithful_schema`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator

from sagents.errors import InvalidArgumentsError, SchemaExportError
from sagents.tool.export_faithful import faithful_schema
from sagents.tool.json_schema import escape_pointer, iter_subschemas, resolve_local_ref

__all__ = [
    "STRICT_FORMATS",
    "STRICT_KEYWORDS",
    "StrictSchema",
    "strict_absent_to_nulls",
    "strict_nulls_to_absent",
    "strict_schema",
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
    """Rewrite ``schema`` to OpenAI's strict subset (rules: :mod:`sagents.tool.openai_export`).

    Raises:
        SchemaExportError: when the schema uses what strict mode cannot express (a value of any
            type, an open map, a multi-member ``allOf``) or fails :func:`faithful_schema`;
            ``details["path"]`` is the JSON Pointer of the node. The input is unchanged.
    """
    optional: dict[str, frozenset[str]] = {}
    try:
        faithful = faithful_schema(schema)
        rewriter = _StrictRewriter(faithful)
        document = rewriter.rewrite(faithful, "")
        _collect_pointers(document, "", rewriter.optional, optional)
    except RecursionError:
        raise SchemaExportError(
            "the schema is nested too deeply to export", details={"path": ""}
        ) from None
    return StrictSchema(schema=document, optional=optional)


class _StrictRewriter:
    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document  # the faithful copy being rewritten (for $ref targets)
        self.optional: dict[int, frozenset[str]] = {}  # id(output object node) -> names
        self._keep: list[Any] = []  # keeps recorded nodes alive, so ids stay unique
        self._recursion: dict[str, bool] = {}

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
        if path == "" and "anyOf" in node:
            raise SchemaExportError(
                "the arguments schema is an anyOf at its root, which OpenAI strict mode refuses",
                hint="export this tool with strict=False",
                details={"path": path},
            )
        notes: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _SILENTLY_DROPPED or (key == "default" and value is None):
                continue  # a null default says nothing a nullable, "null means absent" type doesn't
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
                    n: self.rewrite(s, f"{path}/{defs_key}/{escape_pointer(n)}")
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
        elif isinstance(out.get("$ref"), str):
            if notes:
                _fold(out, notes)
            return self._ref(out, path)
        if notes:
            _fold(out, notes)
        return out

    def _ref(self, out: dict[str, Any], path: str) -> dict[str, Any]:
        """A ``$ref`` site. Strict mode accepts no keyword beside ``$ref`` (the ``openai``
        SDK's own strict helper inlines such refs), so a described ref is inlined with its
        description; a ref into a recursive definition cannot be inlined and is wrapped as a
        one-member ``anyOf`` carrying the description instead."""
        ref, description = out["$ref"], out.get("description")
        if description is None:
            return {"$ref": ref}
        if self._recursive(ref):
            return {"anyOf": [{"$ref": ref}], "description": description}
        target = resolve_local_ref(self.document, ref)
        inlined = {k: v for k, v in target.items() if k not in ("$defs", "definitions")}
        inlined["description"] = description  # the site's words win over the definition's
        return self.rewrite(inlined, path)

    def _recursive(self, ref: str) -> bool:
        """True when the definition ``ref`` points to can reach itself through ``$ref``s."""
        if ref not in self._recursion:
            seen: set[str] = set()
            pending = [ref]
            reaches_itself = False
            while pending and not reaches_itself:
                current = pending.pop()
                try:
                    target = resolve_local_ref(self.document, current)
                except KeyError:
                    continue
                for found in _refs_in(target):
                    if found == ref:
                        reaches_itself = True
                    elif found not in seen:
                        seen.add(found)
                        pending.append(found)
            self._recursion[ref] = reaches_itself
        return self._recursion[ref]

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
            child = self.rewrite(sub, f"{path}/properties/{escape_pointer(name)}")
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


def _refs_in(node: Any) -> list[str]:
    """Every ``$ref`` value inside ``node`` (any depth)."""
    found: list[str] = []
    if isinstance(node, Mapping):
        if isinstance(node.get("$ref"), str):
            found.append(node["$ref"])
        for _, _, child in iter_subschemas(node, ""):
            found.extend(_refs_in(child))
    return found


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
    for _, child_path, child in iter_subschemas(node, path):
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

    Raises:
        InvalidArgumentsError: when the arguments are nested deeper than Python can walk.
    """
    try:
        result = _walk(strict, dict(args), strict.schema, "", to_absent=True)
    except RecursionError:
        raise InvalidArgumentsError(
            "the arguments are nested too deeply",
            details={"problems": ["(arguments): nested too deeply"]},
        ) from None
    return result if isinstance(result, dict) else dict(args)


def strict_absent_to_nulls(strict: StrictSchema, args: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`strict_nulls_to_absent`: original arguments in their strict form.

    Each absent optional property is sent as ``null`` (for replaying history in strict mode and
    for checking the rewrite). ``args`` is not changed.
    """
    try:
        result = _walk(strict, dict(args), strict.schema, "", to_absent=False)
    except RecursionError:
        raise InvalidArgumentsError(
            "the arguments are nested too deeply",
            details={"problems": ["(arguments): nested too deeply"]},
        ) from None
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
            sub_path = f"{path}/properties/{escape_pointer(key)}"
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
        # Branches whose type cannot hold the value are skipped; one left needs no validation.
        fitting = [(i, b) for i, b in enumerate(branches) if _may_hold(strict.schema, b, value)]
        for i, branch in fitting:
            candidate = _walk(strict, value, branch, f"{path}/anyOf/{i}", to_absent=to_absent)
            checked = value if to_absent else candidate
            if len(fitting) == 1 or strict.validator.evolve(schema=branch).is_valid(checked):
                return candidate
    return value


_JSON_TYPES: dict[type, tuple[str, ...]] = {
    type(None): ("null",),
    bool: ("boolean",),
    int: ("integer", "number"),
    float: ("number", "integer"),
    str: ("string",),
    list: ("array",),
    dict: ("object",),
}


def _may_hold(document: Mapping[str, Any], branch: Any, value: Any) -> bool:
    """False only when ``branch`` (after ``$ref`` hops) surely rejects ``value`` by its type."""
    for _ in range(_MAX_REF_HOPS):
        if not (isinstance(branch, Mapping) and isinstance(branch.get("$ref"), str)):
            break
        try:
            branch = resolve_local_ref(document, branch["$ref"])
        except KeyError:
            return True
    if not isinstance(branch, Mapping) or "type" not in branch:
        return True
    declared = branch["type"]
    declared = declared if isinstance(declared, list) else [declared]
    return any(t in declared for t in _JSON_TYPES.get(type(value), (t for t in declared)))

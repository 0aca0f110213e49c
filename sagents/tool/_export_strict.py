"""Strict export: OpenAI's strict subset of JSON Schema, and reading strict answers back.

OpenAI "Structured Outputs", section "Supported schemas"
(https://platform.openai.com/docs/guides/structured-outputs). See :mod:`sagents.tool.openai_export`
for the rules; this module implements them on a deep copy made by
:func:`~sagents.tool._export_faithful.faithful_schema`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema.protocols import Validator

from sagents.errors import InvalidArgumentsError, SchemaExportError
from sagents.tool._arguments import linear_validator
from sagents.tool._export_faithful import faithful_schema
from sagents.tool._json_schema import (
    escape_pointer,
    fixed_length,
    iter_subschemas,
    resolve_local_ref,
)
from sagents.tool._schema_merge import (
    MergeConflict,
    inline_ref,
    merge_conjunction,
    types_exclude,
)

__all__ = [
    "MAX_STRICT_NODES",
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

MAX_STRICT_NODES = 10_000
"""Schema nodes one strict export may write. Inlining described ``$ref``s copies definitions;
past this budget (a hostile schema's ladder of references) the export is refused, so that it
never stalls; pydantic's schemas for real tools stay under a few hundred nodes."""

_SILENTLY_DROPPED = frozenset({"title", "$schema", "$id", "$comment", "readOnly", "writeOnly"})
_REF_ANNOTATIONS = _SILENTLY_DROPPED | {"description", "default", "examples", "deprecated"}
_UNION_KEPT = _REF_ANNOTATIONS | {"$defs", "definitions"}  # stay beside a distributed anyOf
_MAX_REF_HOPS = 64  # a chain of $ref to $ref longer than this is a cycle
_OLD_DRAFT = re.compile(r"json-schema\.org/(draft-0[0-7]|schema)\b")  # "schema": draft-04 era
_MAX_INLINED_NODES = 64  # a described $ref to a definition larger than this is not copied


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
        """A JSON Schema 2020-12 validator of :attr:`schema` (its ``$ref`` resolve locally),
        whose ``pattern`` runs on RE2: the upstream's pattern meets the model's answer."""
        return linear_validator(dict(self.schema))


def strict_schema(schema: Mapping[str, Any]) -> StrictSchema:
    """Rewrite ``schema`` to OpenAI's strict subset (rules: :mod:`sagents.tool.openai_export`).

    Raises:
        SchemaExportError: when the schema uses what strict mode cannot express (a value of any
            type, an open map or ``additionalProperties`` beside ``properties``, a conjunction
            that cannot be merged, more than :data:`MAX_STRICT_NODES` nodes written) or fails
            :func:`faithful_schema`; ``details["path"]`` is the JSON Pointer of the node. The
            input is unchanged.
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
        self._ref_edges: dict[str, frozenset[str]] = {}
        self._smallness: dict[str, bool] = {}  # ref -> its definition is cheap to copy
        self._nodes = 0  # rewrite() calls so far, against MAX_STRICT_NODES
        # Up to draft-07, keywords beside a $ref are ignored; from 2019-09 on they apply too.
        dialect = document.get("$schema")
        self._siblings_apply = not (isinstance(dialect, str) and _OLD_DRAFT.search(dialect))

    def rewrite(self, node: Any, path: str) -> dict[str, Any]:
        self._nodes += 1
        if self._nodes > MAX_STRICT_NODES:
            raise SchemaExportError(
                f"the strict export would write more than {MAX_STRICT_NODES} schema nodes "
                f"(at {path or '/'!r}: references copied into each other)",
                hint="export this tool with strict=False",
                details={"path": path},
            )
        if not isinstance(node, Mapping) or not _constrains_type(node):
            raise SchemaExportError(
                f"the schema at {path or '/'!r} accepts a value of any type; "
                "OpenAI strict mode needs a type",
                hint="give the parameter a concrete type, or export this tool with strict=False",
                details={"path": path},
            )
        node = self._merge_conjunctions(dict(node), path)
        if "oneOf" in node:
            node["anyOf"] = [*node.pop("oneOf"), *node.get("anyOf", [])]
        if path == "" and "anyOf" in node:
            raise SchemaExportError(
                "the arguments schema is an anyOf at its root, which OpenAI strict mode refuses",
                hint="export this tool with strict=False",
                details={"path": path},
            )
        node = self._distribute(node, path)
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
        SDK's own strict helper inlines such refs), so a described ref to a small definition
        (counting what its own refs point to) is inlined with its description; any other
        described ref is wrapped as a one-member ``anyOf`` carrying the description, so that
        the definition stays in ``$defs`` once (inlining definitions that hold described refs
        themselves without a bound grows exponentially)."""
        ref, description = out["$ref"], out.get("description")
        if description is None:
            return {"$ref": ref}
        target = resolve_local_ref(self.document, ref)
        if self._recursive(ref) or not self._small(ref, target):
            return {"anyOf": [{"$ref": ref}], "description": description}
        inlined = {k: v for k, v in target.items() if k not in ("$defs", "definitions")}
        inlined["description"] = description  # the site's words win over the definition's
        return self.rewrite(inlined, path)

    def _small(self, ref: str, target: Any) -> bool:
        if ref not in self._smallness:
            self._smallness[ref] = _small(self.document, target)
        return self._smallness[ref]

    def _recursive(self, ref: str) -> bool:
        """True when the definition ``ref`` points to can reach itself through ``$ref``s."""
        if ref not in self._recursion:
            self._recursion.update(_on_cycles(ref, self._edges, self._recursion))
        return self._recursion[ref]

    def _edges(self, ref: str) -> frozenset[str]:
        """The ``$ref``s inside the definition ``ref`` points to (each definition walked once)."""
        if ref not in self._ref_edges:
            try:
                target = resolve_local_ref(self.document, ref)
            except KeyError:
                target = None
            self._ref_edges[ref] = frozenset(_refs_in(target))
        return self._ref_edges[ref]

    def _merge_conjunctions(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        """Merge ``allOf`` members, and a ``$ref``'s target with the keywords beside it, into
        one schema with the same meaning (:mod:`sagents.tool._schema_merge`); refuse where
        that is not sure."""
        for _ in range(_MAX_REF_HOPS):
            ref = node.get("$ref")
            beside = isinstance(ref, str) and any(
                k not in _REF_ANNOTATIONS and k != "$ref" for k in node
            )
            if "allOf" not in node and not beside:
                return node
            if beside and not self._siblings_apply:
                node = {k: v for k, v in node.items() if k in _REF_ANNOTATIONS or k == "$ref"}
                continue
            try:
                if beside:
                    node = inline_ref(node, self._resolve)
                all_of = node.pop("allOf", [])
                if not isinstance(all_of, list):
                    raise MergeConflict("'allOf' is not a list")
                for member in all_of:
                    if member is True or member == {}:
                        continue
                    if not isinstance(member, Mapping):
                        raise MergeConflict("a member is the schema 'false', which accepts nothing")
                    node = merge_conjunction(node, inline_ref(member, self._resolve), self._resolve)
            except MergeConflict as conflict:
                raise SchemaExportError(
                    f"the schema at {path or '/'!r} combines schemas (allOf, or $ref beside "
                    f"other keywords) that OpenAI strict mode cannot express as one: "
                    f"{conflict.reason}",
                    hint="export this tool with strict=False",
                    details={"path": path},
                ) from None
        raise SchemaExportError(
            f"the schema at {path or '/'!r} nests allOf and $ref too deeply",
            details={"path": path},
        )

    def _distribute(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        """Move the keywords beside an ``anyOf`` into each branch: ``A and anyOf(B, C)`` is
        ``anyOf(A and B, A and C)`` (JSON Schema 2020-12, Core section 10.2.1). Closing the
        object beside the union and each branch separately would otherwise accept nothing
        that needs properties from both. Branches are merged like ``allOf`` members
        (:mod:`sagents.tool._schema_merge`); a branch whose type the siblings exclude accepts
        nothing and is dropped; a merge that is not sure refuses the export. Branches nested
        deeper are distributed when :meth:`rewrite` reaches them."""
        branches = node.get("anyOf")
        if not isinstance(branches, list):
            return node
        siblings = {k: v for k, v in node.items() if k != "anyOf" and k not in _UNION_KEPT}
        if not siblings:
            return node
        merged: list[Any] = []
        for i, branch in enumerate(branches):
            if branch is False:
                continue  # accepts nothing
            if branch is True or branch == {}:
                merged.append(dict(siblings))
                continue
            if not isinstance(branch, Mapping):
                raise SchemaExportError(
                    f"the schema at {path}/anyOf/{i} is not a schema",
                    details={"path": f"{path}/anyOf/{i}"},
                )
            if not self._siblings_apply and isinstance(branch.get("$ref"), str):
                branch = {k: v for k, v in branch.items() if k in _REF_ANNOTATIONS or k == "$ref"}
            try:
                member = inline_ref(branch, self._resolve)
                if types_exclude(siblings, member):
                    continue
                merged.append(merge_conjunction(siblings, member, self._resolve))
            except MergeConflict as conflict:
                raise SchemaExportError(
                    f"the schema at {path or '/'!r} has keywords beside an anyOf/oneOf that "
                    f"cannot be merged into its branch {i} for OpenAI strict mode: "
                    f"{conflict.reason}",
                    hint="export this tool with strict=False",
                    details={"path": f"{path}/anyOf/{i}"},
                ) from None
        if not merged:
            raise SchemaExportError(
                f"no branch of the anyOf/oneOf at {path or '/'!r} fits the type beside it: "
                "the schema accepts nothing",
                hint="fix the schema's types, or export this tool with strict=False",
                details={"path": path},
            )
        return {**{k: v for k, v in node.items() if k in _UNION_KEPT}, "anyOf": merged}

    def _resolve(self, ref: str) -> Mapping[str, Any]:
        target = resolve_local_ref(self.document, ref)
        if not isinstance(target, Mapping):
            raise MergeConflict(f"$ref {ref!r} points to a boolean schema")
        return target

    def _array(self, node: Mapping[str, Any], out: dict[str, Any], path: str) -> None:
        prefix, tail = node.get("prefixItems"), node.get("items")
        if isinstance(tail, list):  # draft-07 tuple form
            prefix, tail = tail, node.get("additionalItems")
        if not (isinstance(prefix, list) and prefix):
            out["items"] = self.rewrite(tail if tail is not None else {}, f"{path}/items")
            return
        if fixed_length(node, len(prefix)):
            tail = False  # pydantic's tuple[int, str]: maxItems leaves no room past the prefix
        if tail is None or tail is True or (isinstance(tail, Mapping) and not tail):
            # The union of the prefix's types would refuse the later items the original takes.
            raise SchemaExportError(
                f"the array at {path or '/'!r} is a tuple whose items after the first "
                f"{len(prefix)} may be of any type, which OpenAI strict mode cannot express",
                hint="bound it with maxItems or give its later items a schema, "
                "or export this tool with strict=False",
                details={"path": path},
            )
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
        if extra is True or isinstance(extra, Mapping) or node.get("patternProperties"):
            # Closing the object would refuse the extra properties the original accepts.
            raise SchemaExportError(
                f"the object at {path or '/'!r} accepts properties beyond its named ones "
                "(additionalProperties or patternProperties), which OpenAI strict mode "
                "cannot express",
                hint="use a model or TypedDict with named fields, or export with strict=False",
                details={"path": path},
            )
        # The root holds the tool's arguments: no properties there means "no arguments", and an
        # explicit empty ``properties`` is read the same way. Elsewhere it is an open map.
        is_map = extra is not False and not (path == "" or "properties" in node)
        if not properties and is_map:
            raise SchemaExportError(
                f"the object at {path or '/'!r} is an open map (no fixed properties), "
                "which OpenAI strict mode cannot express",
                hint="use a model or TypedDict with named fields, or export with strict=False",
                details={"path": path},
            )
        if "type" not in out:
            out["type"] = "object"  # strict mode wants a type on every object node
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


def _on_cycles(
    start: str, edges: Callable[[str], frozenset[str]], known: Mapping[str, bool]
) -> dict[str, bool]:
    """For every ref reachable from ``start`` and not in ``known``: whether it lies on a cycle.

    Tarjan's strongly connected components, iteratively, so each definition is visited once
    over all calls (a ref in ``known`` belongs to a finished component: no new cycle meets it).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: dict[str, bool] = {}
    work: list[tuple[str, list[str]]] = [(start, sorted(edges(start)))]
    index[start] = low[start] = 0
    stack.append(start)
    on_stack.add(start)
    while work:
        node, children = work[-1]
        if children:
            child = children.pop()
            if child in known:
                continue
            if child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, sorted(edges(child))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
            continue
        work.pop()
        if work:
            parent = work[-1][0]
            low[parent] = min(low[parent], low[node])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            cyclic = len(component) > 1 or node in edges(node)
            result.update(dict.fromkeys(component, cyclic))
    return result


def _small(document: Mapping[str, Any], target: Any) -> bool:
    """A definition cheap to copy: at most :data:`_MAX_INLINED_NODES` nodes, counting what its
    own ``$ref``s point to each time (so a copy never holds more than that many nodes)."""
    count, pending = 0, [target]
    while pending:
        current = pending.pop()
        if not isinstance(current, Mapping):
            continue
        count += 1
        if count > _MAX_INLINED_NODES:
            return False
        ref = current.get("$ref")
        if isinstance(ref, str):
            try:
                pending.append(resolve_local_ref(document, ref))
            except KeyError:
                return False
        pending.extend(child for _, _, child in iter_subschemas(current, ""))
    return True


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

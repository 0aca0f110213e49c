"""Inline every ``$ref`` and merge every ``allOf`` of a schema, exactly, within a bound.

Model APIs whose schema language has no references (Gemini's OpenAPI subset) or no recursion
(Anthropic's strict mode) get a document without ``$ref``, ``$defs`` or ``allOf`` that accepts
exactly what the original accepts. What cannot be rewritten so is refused with
:class:`~sagents.errors.SchemaExportError` naming the node, never guessed:

* a recursive ``$ref`` (a definition that reaches itself);
* an ``allOf`` (or a ``$ref`` with sibling keywords, which JSON Schema 2020-12 applies together,
  section 10.2.1) whose members conflict on a keyword that has no exact merge, or where one
  member closes an object (``additionalProperties``, ``patternProperties``) that another member
  adds properties to (up to draft-07 the siblings of a ``$ref`` are ignored: only their
  ``description``/``title`` are kept);
* a nested ``$id`` (it would change the base that ``$ref`` resolves against);
* an output past :data:`MAX_INLINED_NODES` schema nodes: a ladder of described ``$ref`` doubles
  with each rung, and a hostile upstream schema must not stall an export.

Merges are those of :mod:`sagents.tool._schema_merge` (the strict export's): ``properties``
merged recursively, ``required`` united, ``type`` and ``enum`` intersected, numeric bounds the
tighter one, equal values kept, the first side's annotations (a ``$ref`` site's own words win
over its definition's); anything else that both sides set differently is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sagents.errors import SchemaExportError
from sagents.tool._export_faithful import resolve_ref
from sagents.tool._json_schema import (
    SCHEMA_KEYWORDS,
    SCHEMA_LIST_KEYWORDS,
    SCHEMA_MAP_KEYWORDS,
    escape_pointer,
)
from sagents.tool._schema_merge import MergeConflict, merge_conjunction, types_exclude

__all__ = ["MAX_INLINED_NODES", "distribute_unions", "inline_schema", "merge_schemas"]

MAX_INLINED_NODES = 20_000
"""Schema nodes one inlined document may hold (a real tool's schema has tens to hundreds)."""

_WORDS = ("description", "title")
_OLD_DRAFT = re.compile(r"json-schema\.org/(draft-0[0-7]|schema)\b")  # "schema": draft-04 era


def inline_schema(document: Mapping[str, Any], *, target: str) -> dict[str, Any]:
    """The ``$ref``-free, ``allOf``-free equivalent of a self-contained ``document``.

    Args:
        document: A schema whose ``$ref`` all resolve inside it (the output of
            :func:`~sagents.tool._export_faithful.faithful_schema` or of a strict export).
        target: What the document is for, to name in errors ("Gemini", "Anthropic strict mode").

    Returns:
        A new document; ``document`` is not changed.

    Raises:
        SchemaExportError: for the cases in the module docstring (``details["path"]`` is the
            JSON Pointer of the node).
    """
    inliner = _Inliner(document, target)
    try:
        result = inliner.node(document, "", ())
    except RecursionError:
        raise SchemaExportError(
            "the schema is nested too deeply to export", details={"path": ""}
        ) from None
    if not isinstance(result, dict):
        raise SchemaExportError("a tool's input schema must be an object", details={"path": ""})
    return result


def merge_schemas(first: Any, second: Any, *, path: str, target: str) -> Any:
    """The conjunction of two ``$ref``-free schemas as one schema (exact merges only).

    Raises:
        SchemaExportError: when no exact merge exists (see the module docstring).
    """
    return _Inliner({}, target).merge(first, second, path)


def distribute_unions(document: Any, *, target: str, path: str = "") -> Any:
    """Move the keywords beside an ``anyOf``/``oneOf`` into each of its branches, exactly.

    ``A and anyOf(B, C)`` is ``anyOf(A and B, A and C)`` (and the same for ``oneOf``), so each
    branch becomes a whole schema: closing an object in a strict export can then no longer
    reject the properties that a branch adds. Works on a ``$ref``-free document (the output of
    :func:`inline_schema`); a node with both keywords is left as it is.

    Raises:
        SchemaExportError: when a sibling keyword and a branch have no exact merge.
    """
    if not isinstance(document, Mapping):
        return document
    node = {
        key: _distribute_child(key, value, f"{path}/{escape_pointer(key)}", target)
        for key, value in document.items()
    }
    unions = [k for k in ("anyOf", "oneOf") if isinstance(node.get(k), list)]
    if len(unions) != 1:
        return node
    key = unions[0]
    words = {k: node[k] for k in (*_WORDS, "default", "$comment") if k in node}
    siblings = {k: v for k, v in node.items() if k not in words and k != key}
    if not siblings:
        return node
    merger = _Inliner({}, target)
    branches = [
        merger.merge(dict(siblings), branch, f"{path}/{key}/{i}")
        for i, branch in enumerate(node[key])
        if not types_exclude(siblings, branch)  # a branch no value can satisfy: dropped
    ]
    if not branches:
        raise merger.refuse(f"an {key} none of whose branches fits the types beside it", path)
    distributed = {key: branches, **words}
    # Each branch gets a copy of the siblings, so nested unions multiply the size: bound it
    # like inlining, so that a hostile schema is refused instead of stalling the export.
    if _exceeds(distributed, MAX_INLINED_NODES):
        raise SchemaExportError(
            f"moving the keywords beside each {key} into its branches gives more than "
            f"{MAX_INLINED_NODES} schema nodes",
            hint="the schema nests unions beside large properties; export with another mode",
            details={"path": path, "limit": MAX_INLINED_NODES},
        )
    return distributed


def _exceeds(document: Any, limit: int) -> bool:
    """Whether ``document`` holds more than ``limit`` objects (stops counting past it)."""
    count = 0
    pending = [document]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            count += 1
            if count > limit:
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _distribute_child(key: str, value: Any, path: str, target: str) -> Any:
    if key in SCHEMA_KEYWORDS and isinstance(value, Mapping):
        return distribute_unions(value, target=target, path=path)
    if key in SCHEMA_KEYWORDS | SCHEMA_LIST_KEYWORDS and isinstance(value, list):
        return [
            distribute_unions(v, target=target, path=f"{path}/{i}") for i, v in enumerate(value)
        ]
    if key in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
        return {
            n: distribute_unions(v, target=target, path=f"{path}/{escape_pointer(n)}")
            for n, v in value.items()
        }
    return value


class _Inliner:
    def __init__(self, document: Mapping[str, Any], target: str) -> None:
        self.document = document
        self.target = target
        self.count = 0
        # Up to draft-07, keywords beside a $ref are ignored; from 2019-09 on they apply too.
        dialect = document.get("$schema")
        self.siblings_apply = not (isinstance(dialect, str) and _OLD_DRAFT.search(dialect))

    def refuse(self, message: str, path: str, **details: Any) -> SchemaExportError:
        return SchemaExportError(
            f"{message}, which {self.target} cannot express",
            hint=f"simplify the schema at {path or '/'!r}, or export this tool another way",
            details={"path": path, **details},
        )

    def node(self, node: Any, path: str, stack: tuple[str, ...]) -> Any:
        if not isinstance(node, Mapping):
            return node  # a boolean schema
        self.count += 1
        if self.count > MAX_INLINED_NODES:
            raise SchemaExportError(
                f"inlining the schema's $ref gives more than {MAX_INLINED_NODES} schema nodes",
                hint="the schema repeats large definitions many times; export with another mode",
                details={"path": path, "limit": MAX_INLINED_NODES},
            )
        if path and "$id" in node:
            raise self.refuse("a nested $id (it changes how $ref resolve)", path)
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in stack:
                raise self.refuse(f"a recursive $ref {ref!r}", path, ref=ref)
            definition = self.node(resolve_ref(self.document, ref, path), path, (*stack, ref))
            siblings = {
                k: v
                for k, v in node.items()
                if k not in ("$ref", "$defs", "definitions")
                and (self.siblings_apply or k in _WORDS)  # words still help a model
            }
            site = self.node(siblings, path, stack) if siblings else {}
            return self.merge(site, definition, path)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "definitions", "allOf", "$id"):
                continue
            out[key] = self.child(key, value, f"{path}/{escape_pointer(key)}", stack)
        all_of = node.get("allOf")
        if all_of is not None:
            if not isinstance(all_of, list):
                raise self.refuse("an allOf that is not a list", path)
            for i, member in enumerate(all_of):
                out = self.merge(out, self.node(member, f"{path}/allOf/{i}", stack), path)
        return out

    def child(self, key: str, value: Any, path: str, stack: tuple[str, ...]) -> Any:
        if key in SCHEMA_KEYWORDS:
            if isinstance(value, list):  # draft-07 tuple ``items``
                return [self.node(v, f"{path}/{i}", stack) for i, v in enumerate(value)]
            return self.node(value, path, stack)
        if key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            return [self.node(v, f"{path}/{i}", stack) for i, v in enumerate(value)]
        if key in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            return {n: self.node(s, f"{path}/{escape_pointer(n)}", stack) for n, s in value.items()}
        if key == "dependencies" and isinstance(value, Mapping):
            return {
                n: self.node(s, f"{path}/{escape_pointer(n)}", stack)
                if isinstance(s, Mapping)
                else s
                for n, s in value.items()
            }
        return value

    def merge(self, first: Any, second: Any, path: str) -> Any:
        """The conjunction of two ref-free schemas as one schema
        (:func:`~sagents.tool._schema_merge.merge_conjunction`), or a refusal."""
        if second is True or second == {}:
            return first
        if first is True or first == {}:
            return second
        if first is False or second is False:
            raise self.refuse("a schema that accepts nothing", path)
        try:
            return merge_conjunction(first, second, _no_refs)
        except MergeConflict as conflict:
            raise self.refuse(
                f"allOf members that cannot merge ({conflict.reason})", path
            ) from None


def _no_refs(ref: str) -> Mapping[str, Any]:
    raise MergeConflict(f"a $ref {ref!r} left after inlining")  # inlined documents have none

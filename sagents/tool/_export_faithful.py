"""Faithful export of a JSON Schema: self-contained, same accepted inputs.

Works on any JSON Schema dict (local tools' and MCP upstream tools' schemas), on a deep copy.
The root becomes ``type: object`` (a root ``$ref`` is inlined; a missing root type is added);
every ``$ref`` must resolve inside the exported document (``$defs``/``definitions`` stay where
they are); an external or dangling ``$ref`` fails with
:class:`~sagents.errors.SchemaExportError` naming its place, rather than being guessed. An array
without ``items`` gets ``items: {}`` (the same meaning; some providers reject the bare form).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagents.core._spec import MAX_SCHEMA_NESTING, schema_nesting
from sagents.errors import SchemaExportError
from sagents.tool._json_schema import (
    deep_copy_schema,
    iter_subschemas,
    resolve_local_ref,
)

__all__ = ["faithful_schema", "resolve_ref"]

_MAX_REF_HOPS = 64  # a chain of $ref to $ref longer than this is a cycle


def faithful_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A self-contained copy of ``schema`` that accepts exactly the same inputs.

    Raises:
        SchemaExportError: when the root cannot be an object, or a ``$ref`` is external or
            does not resolve inside the document (``details["path"]`` says where).
    """
    if not isinstance(schema, Mapping):
        raise SchemaExportError("a tool's input schema must be a JSON object", details={"path": ""})
    if schema_nesting(schema) > MAX_SCHEMA_NESTING:
        raise SchemaExportError(
            f"the schema is nested too deeply to export (over {MAX_SCHEMA_NESTING} levels of "
            "objects and arrays)",
            details={"path": ""},
        )
    try:
        return _faithful(schema)
    except RecursionError:
        raise SchemaExportError(
            "the schema is nested too deeply to export", details={"path": ""}
        ) from None


def _faithful(schema: Mapping[str, Any]) -> dict[str, Any]:
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
    _add_missing_items(document, "")
    _rebase_nested_ids(document, "", "")
    _check_refs(document, document, "")
    return dict(document)


def _inline_root_ref(document: dict[str, Any]) -> dict[str, Any]:
    for _ in range(_MAX_REF_HOPS):
        ref = document.get("$ref")
        if not isinstance(ref, str):
            return document
        target = resolve_ref(document, ref, "")
        if not isinstance(target, Mapping):
            raise SchemaExportError(
                f"the root $ref {ref!r} does not point to an object schema", details={"path": ""}
            )
        merged = {k: v for k, v in document.items() if k != "$ref"}
        for key, value in deep_copy_schema(target).items():
            if key in ("$defs", "definitions") and key in merged:
                merged[key] = {**value, **merged[key]}
            elif key in merged and merged[key] != value and key not in ("description", "title"):
                raise SchemaExportError(  # both apply in JSON Schema 2020-12: no silent choice
                    f"the root $ref {ref!r} and the root both set {key!r}", details={"path": ""}
                )
            else:
                merged.setdefault(key, value)
        document = merged
    raise SchemaExportError("the root $ref chain is circular", details={"path": ""})


def _add_missing_items(node: Any, path: str) -> None:
    """Add ``items: {}`` to item-less arrays, in place (``node`` is already a private copy)."""
    if not isinstance(node, dict):
        return
    types_ = node.get("type")
    is_array = types_ == "array" or (isinstance(types_, list) and "array" in types_)
    if is_array and "items" not in node and "prefixItems" not in node:
        node["items"] = {}
    for _, child_path, child in iter_subschemas(node, path):
        _add_missing_items(child, child_path)


def _rebase_nested_ids(node: Any, path: str, base: str) -> None:
    """Make local ``$ref``s inside a nested ``$id`` resource point from the document's root.

    A subschema with its own ``$id`` starts a new resource (JSON Schema 2020-12 Core section
    8.2.1): a ``#/$defs/T`` inside it means that resource's ``$defs``, not the root's. Its
    local refs are rewritten to pointers from the root (``base`` is the resource's pointer)
    and the nested ``$id`` is dropped, in place; nothing else refers to it, since refs to
    other URIs are refused as external.
    """
    if not isinstance(node, dict):
        return
    nested_id = node.get("$id")
    if path and isinstance(nested_id, str) and not nested_id.startswith("#"):
        del node["$id"]
        base = path
    ref = node.get("$ref")
    if base and isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
        node["$ref"] = "#" + base + ref[1:]
    for _, child_path, child in iter_subschemas(node, path):
        _rebase_nested_ids(child, child_path, base)


def _check_refs(document: dict[str, Any], node: Any, path: str) -> None:
    if not isinstance(node, Mapping):
        return
    ref = node.get("$ref")
    if isinstance(ref, str):
        resolve_ref(document, ref, path)
    for _, child_path, child in iter_subschemas(node, path):
        _check_refs(document, child, child_path)


def resolve_ref(document: Mapping[str, Any], ref: str, path: str) -> Any:
    """Resolve a local ``$ref`` found at JSON Pointer ``path`` of ``document``.

    Raises:
        SchemaExportError: when ``ref`` is external or does not resolve.
    """
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

"""Walking JSON Schema documents by keyword position, never by guesswork.

A JSON Schema keyword is either a schema (``items``, ``not``), a list of schemas (``anyOf``), a
map of schemas (``properties``, ``$defs``) or plain data (``enum``, ``default``, ``required``).
Only schema positions hold subschemas; a property called ``title`` is data of ``properties``,
not the ``title`` keyword. These tables follow JSON Schema 2020-12 (Core section 10 and
Validation section 6) plus draft-07's ``definitions``, ``dependencies`` and ``additionalItems``.

The helpers here never mutate their input: they build new containers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "SCHEMA_KEYWORDS",
    "SCHEMA_LIST_KEYWORDS",
    "SCHEMA_MAP_KEYWORDS",
    "clean_schema",
    "deep_copy_schema",
    "escape_pointer",
    "fixed_length",
    "iter_subschemas",
    "json_type",
    "map_subschemas",
    "resolve_local_ref",
    "strip_titles",
]

SCHEMA_KEYWORDS = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
"""Keywords whose value is one schema (``items`` may also be a list in draft-07)."""

SCHEMA_LIST_KEYWORDS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
"""Keywords whose value is a list of schemas."""

SCHEMA_MAP_KEYWORDS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
"""Keywords whose value maps names to schemas (draft-07 ``dependencies`` is handled apart:
its values are schemas or lists of property names)."""


def deep_copy_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``schema`` as plain dicts and lists (read-only mappings become dicts)."""
    return _plain(schema)  # type: ignore[no-any-return]  # a Mapping gives a dict


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def map_subschemas(schema: Any, fn: Callable[[Any], Any]) -> Any:
    """Return a copy of one schema node with ``fn`` applied to each direct subschema.

    ``fn`` receives each subschema (a dict or a boolean schema) and returns its replacement.
    Data keywords are copied unchanged. Non-dict schemas (``true``/``false``) are returned as is.
    """
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SCHEMA_KEYWORDS:
            if key in ("items", "additionalItems") and isinstance(value, list):
                out[key] = [fn(v) for v in value]
            else:
                out[key] = fn(value)
        elif key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            out[key] = [fn(v) for v in value]
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            out[key] = {name: fn(sub) for name, sub in value.items()}
        elif key == "dependencies" and isinstance(value, Mapping):
            out[key] = {
                name: fn(sub) if isinstance(sub, Mapping | bool) else copy.deepcopy(sub)
                for name, sub in value.items()
            }
        else:
            out[key] = copy.deepcopy(value)
    return out


def strip_titles(schema: Any) -> Any:
    """Drop every ``title`` keyword (pydantic's generated names), keeping property names.

    Returns a new document; ``$ref``/``$defs`` are untouched, so references stay valid.
    """
    if not isinstance(schema, Mapping):
        return schema
    stripped = map_subschemas(schema, strip_titles)
    stripped.pop("title", None)
    return stripped


def resolve_local_ref(document: Mapping[str, Any], ref: str) -> Any:
    """Resolve a local ``$ref`` (``#``, ``#/$defs/X``, RFC 6901 escapes) inside ``document``.

    Returns:
        The referenced node (not a copy).

    Raises:
        KeyError: when ``ref`` is not local (does not start with ``#``) or points nowhere.
    """
    if not ref.startswith("#"):
        raise KeyError(ref)
    pointer = ref[1:]
    node: Any = document
    if pointer in ("", "/"):
        return node
    if not pointer.startswith("/"):
        raise KeyError(ref)  # a plain-name fragment ("#foo" anchors) is not supported
    for raw in pointer[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(ref)
    return node


def clean_schema(schema: Any) -> Any:
    """:func:`strip_titles`, and drop ``additionalProperties: true`` (the default anyway).

    The result accepts exactly what ``schema`` accepts; it is only shorter for a model.
    """
    if not isinstance(schema, Mapping):
        return schema
    cleaned = map_subschemas(schema, clean_schema)
    cleaned.pop("title", None)
    if cleaned.get("additionalProperties") is True:
        del cleaned["additionalProperties"]
    return cleaned


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value (``integer`` for whole ``int``s, a
    ``bool`` is ``boolean``); the Python type's name for anything JSON cannot hold."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def fixed_length(node: Mapping[str, Any], prefix: int) -> bool:
    """True when the array schema ``node``'s ``maxItems`` allows no item past its first
    ``prefix`` (a tuple's ``prefixItems``), so what it says of later items never applies."""
    bound = node.get("maxItems")
    return isinstance(bound, int) and not isinstance(bound, bool) and bound <= prefix


def escape_pointer(name: str) -> str:
    """Escape one JSON Pointer reference token (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return name.replace("~", "~0").replace("/", "~1")


def iter_subschemas(node: Mapping[str, Any], path: str) -> list[tuple[str, str, Any]]:
    """Each direct subschema (dict) of ``node`` as ``(keyword, JSON Pointer, subschema)``.

    Args:
        node: A schema node.
        path: The JSON Pointer of ``node`` ("" for the document's root).
    """
    found: list[tuple[str, str, Any]] = []
    for key, value in node.items():
        base = f"{path}/{escape_pointer(key)}"
        is_list = key in SCHEMA_LIST_KEYWORDS or key in ("items", "additionalItems")
        if isinstance(value, list) and is_list:
            found.extend((key, f"{base}/{i}", v) for i, v in enumerate(value) if _is_node(v))
        elif isinstance(value, Mapping) and (key in SCHEMA_MAP_KEYWORDS or key == "dependencies"):
            found.extend(
                (key, f"{base}/{escape_pointer(n)}", v) for n, v in value.items() if _is_node(v)
            )
        elif isinstance(value, Mapping) and key in SCHEMA_KEYWORDS:
            found.append((key, base, value))
    return found


def _is_node(value: Any) -> bool:
    return isinstance(value, Mapping)

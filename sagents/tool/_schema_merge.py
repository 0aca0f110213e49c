"""Merging the members of a conjunction (``allOf``, ``$ref`` beside other keywords) into one schema.

JSON Schema 2020-12 (Core section 10.2.1.1 for ``allOf``, section 8.2.3.1 for ``$ref`` beside
other keywords) applies every member to the same instance. OpenAI's strict subset has neither a
multi-member ``allOf`` nor keywords beside ``$ref``, so the strict export merges them into one
schema that accepts exactly what all members accept, and refuses (:class:`MergeConflict`) where
it cannot be sure of that: two ``pattern``s, two ``anyOf``s, a closed object meeting a property
it does not list, keywords that read their siblings (``unevaluatedProperties``, ``if``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MergeConflict", "inline_ref", "merge_conjunction", "types_exclude"]

_ANNOTATIONS = frozenset({"description", "title", "$comment", "examples", "default", "deprecated"})
_LOWER_BOUNDS = frozenset(
    {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
)
_UPPER_BOUNDS = frozenset(
    {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}
)
_READS_SIBLINGS = frozenset({"unevaluatedProperties", "unevaluatedItems", "if", "then", "else"})
_MAX_DEPTH = 32  # merging nested properties through $ref chains deeper than this: refuse

Resolver = Callable[[str], Mapping[str, Any]]


class MergeConflict(Exception):
    """The members cannot be merged into one schema with the same meaning."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def merge_conjunction(
    first: Mapping[str, Any], second: Mapping[str, Any], resolve: Resolver
) -> dict[str, Any]:
    """One schema accepting exactly the instances both ``first`` and ``second`` accept.

    Args:
        first: A schema node; its annotations (``description``, ``title``, ``default``) win.
        second: Another schema node (neither has a ``$ref`` at its top: resolve it first).
        resolve: Gives the target of a local ``$ref`` met inside properties being merged.

    Raises:
        MergeConflict: where one schema could not say the same thing.
    """
    return _merge(dict(first), dict(second), resolve, 0)


def _merge(a: dict[str, Any], b: dict[str, Any], resolve: Resolver, depth: int) -> dict[str, Any]:
    if _same(a, b):
        return dict(a)
    if depth > _MAX_DEPTH:
        raise MergeConflict("the members nest through references too deeply to merge")
    _check_closed(a, b)
    _check_closed(b, a)
    out = dict(a)
    for key, theirs in b.items():
        if key not in out:
            if key in _READS_SIBLINGS:
                raise MergeConflict(f"{key!r} depends on the keywords beside it")
            tuple_parts = {"items", "prefixItems"}
            if key in tuple_parts and tuple_parts - {key} <= set(a):  # items reads prefixItems
                raise MergeConflict("'items' and 'prefixItems' from different members")
            out[key] = theirs
            continue
        ours = out[key]
        if _same(ours, theirs) or key in _ANNOTATIONS:
            continue
        out[key] = _merge_keyword(key, ours, theirs, resolve, depth)
    return out


def _merge_keyword(key: str, ours: Any, theirs: Any, resolve: Resolver, depth: int) -> Any:
    if key == "type":
        return _merge_types(ours, theirs)
    if key == "required" and isinstance(ours, list) and isinstance(theirs, list):
        return [*ours, *(name for name in theirs if name not in ours)]
    if key == "enum" and isinstance(ours, list) and isinstance(theirs, list):
        both = [value for value in ours if any(_same(value, other) for other in theirs)]
        if not both:
            raise MergeConflict("the members' 'enum's share no value")
        return both
    if key in _LOWER_BOUNDS and _numbers(ours, theirs):
        return max(ours, theirs)
    if key in _UPPER_BOUNDS and _numbers(ours, theirs):
        return min(ours, theirs)
    if key == "properties" and isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        merged = dict(ours)
        for name, sub in theirs.items():
            merged[name] = _merge_sub(merged[name], sub, resolve, depth) if name in ours else sub
        return merged
    if key in ("items", "additionalProperties", "contains", "propertyNames"):
        return _merge_sub(ours, theirs, resolve, depth)
    if key == "not" and isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        return {"anyOf": [ours, theirs]}  # not A and not B == not (A or B)
    if (
        key in ("$defs", "definitions")
        and isinstance(ours, Mapping)
        and isinstance(theirs, Mapping)
    ):
        clash = [n for n in theirs if n in ours and ours[n] != theirs[n]]
        if clash:
            raise MergeConflict(f"two different definitions named {clash[0]!r}")
        return {**ours, **theirs}
    raise MergeConflict(f"the members both set {key!r}, differently")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``false`` is not ``0`` (Python's ``==`` says it is), ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _merge_sub(ours: Any, theirs: Any, resolve: Resolver, depth: int) -> Any:
    if _same(ours, theirs):
        return ours
    if ours is True or ours == {}:
        return theirs
    if theirs is True or theirs == {}:
        return ours
    if not (isinstance(ours, Mapping) and isinstance(theirs, Mapping)):
        raise MergeConflict("a boolean schema meets another schema")
    return _merge(inline_ref(ours, resolve), inline_ref(theirs, resolve), resolve, depth + 1)


def inline_ref(node: Mapping[str, Any], resolve: Resolver) -> dict[str, Any]:
    """``node`` with a top-level ``$ref`` replaced by its target merged with the siblings.

    Raises:
        MergeConflict: the siblings and the target cannot be merged.
    """
    node = dict(node)
    for _ in range(_MAX_DEPTH):
        ref = node.pop("$ref", None)
        if not isinstance(ref, str):
            return node
        target = {k: v for k, v in resolve(ref).items() if k not in ("$defs", "definitions")}
        node = _merge(node, target, resolve, 0) if node else target
    raise MergeConflict("a chain of $ref too long to follow")


def types_exclude(first: Any, second: Any) -> bool:
    """True when both schemas have a ``type`` and they share none (``integer`` is a number):
    no instance satisfies both, so their conjunction accepts nothing."""
    if not (isinstance(first, Mapping) and isinstance(second, Mapping)):
        return False
    if "type" not in first or "type" not in second:
        return False
    a = set(first["type"] if isinstance(first["type"], list) else [first["type"]])
    b = set(second["type"] if isinstance(second["type"], list) else [second["type"]])
    numbers = {"integer", "number"}
    return not (a & b) and not (a & numbers and b & numbers)


def _merge_types(ours: Any, theirs: Any) -> Any:
    mine = ours if isinstance(ours, list) else [ours]
    other = theirs if isinstance(theirs, list) else [theirs]
    kept = [t for t in mine if t in other or (t == "integer" and "number" in other)]
    kept += [t for t in other if t == "integer" and "number" in mine and t not in kept]
    if not kept:
        raise MergeConflict(f"the members' types {ours!r} and {theirs!r} share no value")
    return kept[0] if len(kept) == 1 else kept


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _check_closed(closed: Mapping[str, Any], other: Mapping[str, Any]) -> None:
    """A member with ``additionalProperties`` restricts the names the other member lists."""
    extra = closed.get("additionalProperties")
    if extra is None or extra is True or extra == {}:
        return
    names = set(closed.get("properties") or {})
    if closed.get("patternProperties") or other.get("patternProperties"):
        raise MergeConflict("'additionalProperties' beside 'patternProperties' of another member")
    outside = [n for n in (other.get("properties") or {}) if n not in names]
    outside += [n for n in (other.get("required") or []) if n not in names and n not in outside]
    if outside:
        raise MergeConflict(
            f"one member closes the object ('additionalProperties') and another lists "
            f"{outside[0]!r}, which the first does not"
        )

"""Fit a tool result into ``MAX_TOOL_RESULT_TOKENS`` while keeping it well-formed.

Text is cut in the middle: the head (about 60 % of the budget) and the tail (the rest) are kept
with a marker between them that says how many characters were cut; cuts fall on token
boundaries, never inside a character, and move to a nearby line break when there is one.

A JSON document is never cut into invalid JSON. It is shrunk structurally instead, and the
result still parses with ``json.loads``: long arrays keep their first and last items with a
string element ``"[... N more items ...]"`` between them; objects with many keys keep the first
ones and add a ``"..."`` key saying how many were left out; long strings keep their start and end
``"[... N more characters ...]"``; and, if that is still too long, containers below some depth
become a string saying what was left out (always below 64 levels, which also keeps a very deep
document from exhausting Python's recursion limit). The limits are halved until the document
fits.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from sagents.core._tokens import TokenCounter, default_token_counter

__all__ = [
    "ENV_MAX_TOOL_RESULT_TOKENS",
    "MAX_TOOL_RESULT_TOKENS",
    "max_tool_result_tokens",
    "truncate_json",
    "truncate_text",
]

MAX_TOOL_RESULT_TOKENS = 12000
"""Default budget of one rendered tool result, in tokens (docs/tools.md)."""

ENV_MAX_TOOL_RESULT_TOKENS = "SAGE_MAX_TOOL_RESULT_TOKENS"
"""Environment variable overriding :data:`MAX_TOOL_RESULT_TOKENS`, read on every call."""

_HEAD_SHARE = 0.6  # of the budget, for the head of a cut text
_LINE_SNAP = 0.2  # move a cut to a line break within this share of the kept part
_MIN_STRING = 16  # characters of a string kept at the smallest structural limit
_ATTEMPTS = 6  # re-cuts when head + marker + tail came out over the budget
_MAX_DEPTH = 64  # containers nested deeper than this become summary strings when shrinking

logger = logging.getLogger(__name__)


def max_tool_result_tokens() -> int:
    """The budget: ``SAGE_MAX_TOOL_RESULT_TOKENS`` if it is a positive integer, else the default.

    An invalid value is logged as a warning and the default is used.
    """
    raw = os.environ.get(ENV_MAX_TOOL_RESULT_TOKENS)
    if raw is None or not raw.strip():
        return MAX_TOOL_RESULT_TOKENS
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        logger.warning(
            "%s=%r is not a positive integer; using %d",
            ENV_MAX_TOOL_RESULT_TOKENS,
            raw,
            MAX_TOOL_RESULT_TOKENS,
        )
        return MAX_TOOL_RESULT_TOKENS
    return value


def truncate_text(
    text: str,
    max_tokens: int,
    *,
    counter: TokenCounter | None = None,
    limit_label: int | None = None,
) -> str:
    """Keep the head and the tail of ``text`` within ``max_tokens``, with a marker between.

    Args:
        text: Any text.
        max_tokens: The budget in tokens (at least 1). Below about 40 tokens the marker alone
            may exceed it; the marker is kept anyway, so that a cut is always visible.
        counter: The token counter (default: :func:`default_token_counter`).
        limit_label: The limit the marker names (default ``max_tokens``): the whole result's
            limit when ``text`` is only a part of the result, given a share of it.

    Returns:
        ``text`` itself when it fits; else head + marker + tail.
    """
    counter = counter or default_token_counter()
    if not counter.exceeds(text, max_tokens):
        return text
    label = max_tokens if limit_label is None else limit_label
    budget = max_tokens - counter.count(_marker(len(text), len(text), label))
    result = ""
    for _ in range(_ATTEMPTS):
        budget = max(budget, 2)
        head_tokens = max(1, int(budget * _HEAD_SHARE))
        head = _snap_head(counter.head(text, head_tokens))
        tail = _snap_tail(counter.tail(text[len(head) :], budget - head_tokens))
        omitted = len(text) - len(head) - len(tail)
        result = head + _marker(omitted, len(text), label) + tail
        if not counter.exceeds(result, max_tokens) or budget == 2:
            break
        budget = int(budget * 0.85)
    return result


def truncate_json(value: Any, max_tokens: int, *, counter: TokenCounter | None = None) -> str:
    """Serialise a JSON value within ``max_tokens``, shrinking it structurally if needed.

    Args:
        value: A JSON-compatible value (dicts, lists, str, numbers, bools, None).
        max_tokens: The budget in tokens.
        counter: The token counter (default: :func:`default_token_counter`).

    Returns:
        Compact JSON text that ``json.loads`` accepts (see the module docstring for the
        markers it may contain).
    """
    counter = counter or default_token_counter()
    text = _dumps(value)
    if not counter.exceeds(text, max_tokens):
        return text
    items, chars, depth = _extent(value)
    depth = min(depth, _MAX_DEPTH)  # _shrink recurses once per level
    items = min(items, max_tokens)
    chars = min(chars, max_tokens * 4)
    while True:
        text = _dumps(_shrink(value, items, chars, depth))
        if not counter.exceeds(text, max_tokens):
            return text
        if items <= 1 and chars <= _MIN_STRING:
            break
        items, chars = max(1, items // 2), max(_MIN_STRING, chars // 2)
    best = _dumps(_shrink(value, 1, _MIN_STRING, 0))  # the whole document as one summary
    low, high = 1, depth - 1  # the deepest level that still fits, by bisection
    while low <= high:
        middle = (low + high) // 2
        text = _dumps(_shrink(value, 1, _MIN_STRING, middle))
        if counter.exceeds(text, max_tokens):
            high = middle - 1
        else:
            best, low = text, middle + 1
    return best


def _marker(omitted: int, total: int, max_tokens: int) -> str:
    return (
        f"\n[... {omitted:,} of {total:,} characters cut here to fit the "
        f"{max_tokens:,}-token limit for tool results ...]\n"
    )


def _snap_head(head: str) -> str:
    cut = head.rfind("\n")
    return head[: cut + 1] if cut >= len(head) * (1 - _LINE_SNAP) and cut > 0 else head


def _snap_tail(tail: str) -> str:
    cut = tail.find("\n")
    return tail[cut + 1 :] if 0 <= cut < len(tail) * _LINE_SNAP else tail


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _extent(value: Any) -> tuple[int, int, int]:
    """(largest container size, longest string, depth) of a JSON value."""
    items = chars = depth = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            items, depth = max(items, len(node)), max(depth, level + 1)
            chars = max(chars, *(len(k) for k in node), 0)
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            items, depth = max(items, len(node)), max(depth, level + 1)
            stack.extend((v, level + 1) for v in node)
        elif isinstance(node, str):
            chars = max(chars, len(node))
    return max(items, 1), max(chars, _MIN_STRING), depth


def _shrink(value: Any, items: int, chars: int, depth: int) -> Any:
    if isinstance(value, str):
        if len(value) <= chars:
            return value
        keep_head = chars - chars // 4
        keep_tail = chars // 4
        omitted = len(value) - keep_head - keep_tail
        return (
            value[:keep_head]
            + f"[... {omitted:,} more characters ...]"
            + (value[-keep_tail:] if keep_tail else "")
        )
    if isinstance(value, dict | list) and depth <= 0:
        kind = "object" if isinstance(value, dict) else "array"
        return f"[... {kind} of {len(value):,} entries left out ...]"
    if isinstance(value, list):
        if len(value) <= items:
            return [_shrink(v, items, chars, depth - 1) for v in value]
        first = items - items // 2
        last = items // 2
        kept = [*value[:first], f"[... {len(value) - items:,} more items ...]"]
        kept_tail = value[len(value) - last :] if last else []
        return [
            *(_shrink(v, items, chars, depth - 1) for v in kept[:-1]),
            kept[-1],
            *(_shrink(v, items, chars, depth - 1) for v in kept_tail),
        ]
    if isinstance(value, dict):
        shrunk = {
            _shrink(k, items, chars, depth): _shrink(v, items, chars, depth - 1)
            for k, v in list(value.items())[:items]
        }
        if len(value) > items:
            shrunk["..."] = f"{len(value) - items:,} more keys left out"
        return shrunk
    return value

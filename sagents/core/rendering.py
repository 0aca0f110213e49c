"""Render a ``ToolResult`` into the text a model receives.

Placeholder rendering without truncation; the tool-core work replaces it with token-bounded
rendering (``MAX_TOOL_RESULT_TOKENS``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagents.core.result import ToolResult

__all__ = ["render_tool_message"]


def render_tool_message(result: ToolResult, *, max_tokens: int | None = None) -> str:
    """Text blocks verbatim; a structured-only result as JSON."""
    from sagents.core.result import TextContent

    parts = [b.text for b in result.content if isinstance(b, TextContent)]
    if not parts and result.structured is not None:
        parts.append(json.dumps(result.structured, ensure_ascii=False))
    return "\n".join(parts)

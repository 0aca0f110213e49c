"""``ToolResult`` and its content blocks: the one result type of every tool call.

Mirrors MCP's ``CallToolResult`` (MCP spec 2025-06-18, "Tool Result"): a list of content blocks
(text, image, audio, resource link, embedded resource), optional ``structured`` content (MCP's
``structuredContent``), and ``is_error``. Failures of the layer itself (unknown tool, bad
arguments, timeout, ...) also carry an :class:`ErrorInfo` with a stable code from
:mod:`sagents.errors`; ``is_error`` is true for every failure.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sagents.errors import SagentsError

__all__ = [
    "AudioContent",
    "ContentBlock",
    "EmbeddedResource",
    "ErrorInfo",
    "ImageContent",
    "ResourceLink",
    "TextContent",
    "ToolResult",
]


@dataclass(frozen=True, kw_only=True)
class TextContent:
    """A text block (MCP ``TextContent``)."""

    type: Literal["text"] = "text"
    text: str


@dataclass(frozen=True, kw_only=True)
class ImageContent:
    """An image (MCP ``ImageContent``). ``data`` is base64; never rendered into model text."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str


@dataclass(frozen=True, kw_only=True)
class AudioContent:
    """Audio (MCP ``AudioContent``). ``data`` is base64; never rendered into model text."""

    type: Literal["audio"] = "audio"
    data: str
    mime_type: str


@dataclass(frozen=True, kw_only=True)
class ResourceLink:
    """A link to a resource the client may read (MCP ``ResourceLink``)."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


@dataclass(frozen=True, kw_only=True)
class EmbeddedResource:
    """A resource embedded in the result (MCP ``EmbeddedResource``): ``text`` or base64 ``blob``."""

    type: Literal["resource"] = "resource"
    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """A failure of the layer itself: stable ``code`` (see :mod:`sagents.errors`), message, hint."""

    code: str
    message: str
    hint: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_exception(cls, error: SagentsError) -> ErrorInfo:
        """Build from a sagents error, keeping its code, message, hint and details."""
        return cls(code=error.code, message=error.message, hint=error.hint, details=error.details)

    def to_exception(self) -> SagentsError:
        """Rebuild the typed error (round trip of :meth:`from_exception`)."""
        return SagentsError.from_dict(
            {
                "code": self.code,
                "message": self.message,
                "hint": self.hint,
                "details": dict(self.details),
            }
        )


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """The result of one tool call.

    Attributes:
        content: Content blocks, in order.
        structured: JSON-serialisable structured content (MCP ``structuredContent``), or None.
        is_error: True when the call failed, whether the tool reported it or the layer did.
        error: For failures of the layer itself (and of an upstream protocol), the code,
            message and hint; None when the tool itself reported the error or succeeded.
        meta: Extra JSON-serialisable data (for example an MCP result's ``_meta``).
    """

    content: tuple[ContentBlock, ...] = ()
    structured: Any = None
    is_error: bool = False
    error: ErrorInfo | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str, *, is_error: bool = False) -> ToolResult:
        """A result holding one text block."""
        return cls(content=(TextContent(text=text),), is_error=is_error)

    @classmethod
    def from_structured(cls, value: Any) -> ToolResult:
        """A result with ``structured`` content and its JSON text as the one text block.

        The text block follows the MCP spec's advice that a tool returning structured content
        also return it serialised in a text block for clients that read only text.
        """
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return cls(content=(TextContent(text=text),), structured=value)

    @classmethod
    def from_error(
        cls,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> ToolResult:
        """An error result of the layer itself, with a text block that states the error."""
        info = ErrorInfo(code=code, message=message, hint=hint, details=dict(details or {}))
        return cls(content=(TextContent(text=_error_text(info)),), is_error=True, error=info)

    @classmethod
    def from_exception(cls, error: SagentsError) -> ToolResult:
        """An error result from a sagents error (its code, message, hint and details)."""
        return cls.from_error(error.code, error.message, hint=error.hint, details=error.details)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (no media, no structured content)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextContent))

    def with_content(self, content: Sequence[ContentBlock]) -> ToolResult:
        """Deprecated: ``dataclasses.replace(result, content=tuple(...))``
        does the same. A copy with other content blocks."""
        warnings.warn(
            "ToolResult.with_content is deprecated: use dataclasses.replace(result, content=...)",
            DeprecationWarning,
            stacklevel=2,
        )
        return ToolResult(
            content=tuple(content),
            structured=self.structured,
            is_error=self.is_error,
            error=self.error,
            meta=self.meta,
        )

    def to_tool_message(self, max_tokens: int | None = None) -> str:
        """Render what the model receives, truncated to ``max_tokens`` (see
        :func:`sagents.core._rendering.render_tool_message`)."""
        from sagents.core._rendering import render_tool_message

        return render_tool_message(self, max_tokens=max_tokens)


def _error_text(info: ErrorInfo) -> str:
    text = f"Error [{info.code}]: {info.message}"
    if info.hint:
        text += f"\nHint: {info.hint}"
    return text

"""The original import path for tool value types (they live in :mod:`sagents.core`).

``from sagents.tool.tool_schema import ToolSpec, SseServerParameters,
StreamableHttpServerParameters`` keeps working; the remote MCP parameters live in
:mod:`sagents.mcp._params`. They are imported on first access (a module ``__getattr__``, PEP 562),
so that the value types do not pull in the MCP SDK.
"""

from typing import TYPE_CHECKING, Any

from sagents.core._permissions import (
    PERMISSION_CLASSES,
    PERMISSION_MODES,
    PermissionClass,
    PermissionMode,
    ToolAnnotations,
    classify_annotations,
)
from sagents.core._result import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ErrorInfo,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from sagents.core._spec import ToolSource, ToolSourceKind, ToolSpec

if TYPE_CHECKING:
    from sagents.mcp._params import SseServerParameters, StreamableHttpServerParameters

__all__ = [
    "PERMISSION_CLASSES",
    "PERMISSION_MODES",
    "AudioContent",
    "ContentBlock",
    "EmbeddedResource",
    "ErrorInfo",
    "ImageContent",
    "PermissionClass",
    "PermissionMode",
    "ResourceLink",
    "SseServerParameters",
    "StreamableHttpServerParameters",
    "TextContent",
    "ToolAnnotations",
    "ToolResult",
    "ToolSource",
    "ToolSourceKind",
    "ToolSpec",
    "classify_annotations",
]

_MCP_NAMES = frozenset({"SseServerParameters", "StreamableHttpServerParameters"})


def __getattr__(name: str) -> Any:
    if name in _MCP_NAMES:
        from sagents.mcp import _params as params

        return getattr(params, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

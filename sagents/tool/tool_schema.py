"""The seed design's import path for tool value types (they live in :mod:`sagents.core`).

``from sagents.tool.tool_schema import ToolSpec, SseServerParameters,
StreamableHttpServerParameters`` works as the seed design wrote it; the remote MCP parameters live
in :mod:`sagents.mcp.params`.
"""

from sagents.core.permissions import (
    PERMISSION_CLASSES,
    PERMISSION_MODES,
    PermissionClass,
    PermissionMode,
    ToolAnnotations,
    classify_annotations,
)
from sagents.core.result import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ErrorInfo,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from sagents.core.spec import ToolSource, ToolSourceKind, ToolSpec
from sagents.mcp.params import SseServerParameters, StreamableHttpServerParameters

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

"""Plain frozen values shared by several layers: tool specs, results, permissions, events.

Floor 1 of ``docs/architecture.md`` ("Layers"): ``sagents.mcp`` builds these values without
importing ``sagents.tool``.
"""

from sagents.core._permissions import (
    PERMISSION_CLASSES,
    PERMISSION_MODES,
    PermissionClass,
    PermissionMode,
    ToolAnnotations,
    classify_annotations,
    parse_permission_mode,
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
    "TextContent",
    "ToolAnnotations",
    "ToolResult",
    "ToolSource",
    "ToolSourceKind",
    "ToolSpec",
    "classify_annotations",
    "parse_permission_mode",
]

"""The seed design's MCP entry point: a thin re-export of :mod:`sagents.mcp`.

``ToolManager.register_mcp_server`` builds on :class:`MCPSupervisor`; the parameters classes are
also importable from ``sagents.tool.tool_schema`` as the seed design shows.
"""

from mcp import StdioServerParameters

from sagents.mcp import (
    MCPSupervisor,
    ServerParams,
    ServerSettings,
    ServerStatus,
    SseServerParameters,
    StreamableHttpServerParameters,
    WithheldTool,
)

__all__ = [
    "MCPSupervisor",
    "ServerParams",
    "ServerSettings",
    "ServerStatus",
    "SseServerParameters",
    "StdioServerParameters",
    "StreamableHttpServerParameters",
    "WithheldTool",
]

"""The public MCP entry point of ``sagents.tool``: a thin re-export of :mod:`sagents.mcp`.

``ToolManager.register_mcp_server`` builds on :class:`MCPSupervisor`; the parameters classes are
also importable from ``sagents.tool.tool_schema`` (docs/mcp.md).
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

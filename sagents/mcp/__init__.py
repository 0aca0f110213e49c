"""Upstream MCP servers on the official ``mcp`` SDK (floor 2 of ``docs/architecture.md``).

:class:`MCPSupervisor` owns the connections; :mod:`sagents.mcp._params` says where servers are;
:mod:`sagents.mcp._convert` turns MCP tools and results into sagents values.
"""

from sagents.mcp._catalog import CatalogChangedCallback, CatalogKind, ServerCatalog
from sagents.mcp._connection import ToolsChangedCallback
from sagents.mcp._convert import (
    TOOL_NAME_SEPARATOR,
    check_input_schema,
    check_server_name,
    convert_result,
    mcp_tool_name,
    split_tool_name,
    tool_to_spec,
)
from sagents.mcp._params import (
    InProcessServer,
    ServerParams,
    SseServerParameters,
    StdioServerParameters,
    StreamableHttpServerParameters,
    UpstreamOAuth,
    describe_params,
)
from sagents.mcp._settings import DEFAULT_MAX_CONCURRENCY, ServerSandbox, ServerSettings
from sagents.mcp._status import ServerState, ServerStatus, WithheldTool
from sagents.mcp._supervisor import MCPSupervisor, default_log_dir

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "TOOL_NAME_SEPARATOR",
    "CatalogChangedCallback",
    "CatalogKind",
    "InProcessServer",
    "MCPSupervisor",
    "ServerCatalog",
    "ServerParams",
    "ServerSandbox",
    "ServerSettings",
    "ServerState",
    "ServerStatus",
    "SseServerParameters",
    "StdioServerParameters",
    "StreamableHttpServerParameters",
    "ToolsChangedCallback",
    "UpstreamOAuth",
    "WithheldTool",
    "check_input_schema",
    "check_server_name",
    "convert_result",
    "default_log_dir",
    "describe_params",
    "mcp_tool_name",
    "split_tool_name",
    "tool_to_spec",
]

"""sagents.gateway: session policy, profiles and the MCP server façade (``sagents serve``).

Floor 5 of ``docs/architecture.md`` ("Layers"), beside ``sagents.agent``; see ``docs/gateway.md``.
"""

from sagents.gateway._approval import (
    ClientScriptApprover,
    ElicitationApprover,
    GatewayCallApprover,
    current_client_asker,
)
from sagents.gateway._convert import spec_to_mcp_tool, to_call_tool_result
from sagents.gateway._factory import build_gateway, open_gateway
from sagents.gateway._http_server import build_http_app, check_bind, serve_http
from sagents.gateway._offer import ScriptHost
from sagents.gateway._policy import Profile, is_offered
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._seams import MemoryProgressSource, ProgressSource, ProxyProvider
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings, load_profiles
from sagents.gateway._tool_search import ToolSearch
from sagents.gateway._workspaces import Workspaces
from sagents.tool._background import BackgroundRegistry, BackgroundTasks, TaskInfo, TaskStatus

__all__ = [
    "BackgroundRegistry",
    "BackgroundTasks",
    "ClientScriptApprover",
    "ConfiguredGateway",
    "ElicitationApprover",
    "Gateway",
    "GatewayCallApprover",
    "GatewaySettings",
    "MemoryProgressSource",
    "Profile",
    "ProgressSource",
    "ProxyProvider",
    "ScriptHost",
    "TaskInfo",
    "TaskStatus",
    "ToolSearch",
    "Workspaces",
    "build_gateway",
    "build_http_app",
    "check_bind",
    "current_client_asker",
    "is_offered",
    "load_profiles",
    "open_gateway",
    "serve_http",
    "spec_to_mcp_tool",
    "to_call_tool_result",
]

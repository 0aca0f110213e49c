"""sagents.gateway: session policy, profiles and the MCP server façade (``sagents serve``).

Floor 5 of ``docs/architecture.md`` ("Layers"), beside ``sagents.agent``; see ``docs/gateway.md``.
"""

from sagents.gateway.approval import (
    ClientScriptApprover,
    ElicitationApprover,
    GatewayCallApprover,
    current_client_asker,
)
from sagents.gateway.background import BackgroundRegistry, BackgroundTasks, TaskInfo, TaskStatus
from sagents.gateway.convert import spec_to_mcp_tool, to_call_tool_result
from sagents.gateway.factory import build_gateway, open_gateway
from sagents.gateway.http_server import build_http_app, check_bind, serve_http
from sagents.gateway.offer import ScriptHost
from sagents.gateway.policy import Profile, is_offered
from sagents.gateway.seams import MemoryProgressSource, ProgressSource, ProxyProvider
from sagents.gateway.server import Gateway
from sagents.gateway.settings import GatewaySettings, load_profiles
from sagents.gateway.tool_search import ToolSearch
from sagents.gateway.workspaces import Workspaces

__all__ = [
    "BackgroundRegistry",
    "BackgroundTasks",
    "ClientScriptApprover",
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

"""sagents.gateway: session policy, profiles and the MCP server façade (``sagents serve``).

Floor 5 of ``docs/architecture.md`` ("Layers"), beside ``sagents.agent``; see ``docs/gateway.md``.
"""

import warnings
from typing import TYPE_CHECKING, Any

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
from sagents.tool._background import (
    BackgroundRegistry,
    BackgroundStatus,
    BackgroundTasks,
    TaskInfo,
)

if TYPE_CHECKING:
    TaskStatus = BackgroundStatus  # deprecated: see __getattr__

__all__ = [
    "BackgroundRegistry",
    "BackgroundStatus",
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


def __getattr__(name: str) -> Any:
    # ``TaskStatus``, deprecated: the name of the sandbox's ``sagents.sandbox.TaskStatus`` too.
    if name == "TaskStatus":
        warnings.warn(
            "sagents.gateway.TaskStatus is deprecated: use sagents.gateway.BackgroundStatus "
            "(sagents.sandbox.TaskStatus is a sandbox process's state)",
            DeprecationWarning,
            stacklevel=2,
        )
        return BackgroundStatus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

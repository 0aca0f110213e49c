"""sagents.tool: ``@tool``, the registry, the session whitelist and the call path.

``from sagents.tool import ToolManager, ToolProxy`` is the public import path. Floor 3 of
``docs/architecture.md`` ("Layers"), which also draws the call path; see ``docs/tools.md``.
"""

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool._approval import (
    APPROVAL_ANSWERS,
    AllowAllApprover,
    ApprovalAnswer,
    ApprovalKind,
    ApprovalRequest,
    Approver,
    Decision,
    DecisionKind,
    DenyAllApprover,
    ExplainsDenial,
    approval_needed,
    denial_reason,
    settle_answer,
)
from sagents.tool._call import ToolRequest
from sagents.tool._context import InjectedArg, SessionContext
from sagents.tool._handler import ToolCall, ToolHandler
from sagents.tool._local_tool import LocalTool, build_local_tool
from sagents.tool._middleware import HookDecision, ToolMiddleware
from sagents.tool._provider import ToolProvider
from sagents.tool._spec_provider import SpecProvider
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.tool_base import tool
from sagents.tool.tool_manager import (
    DEFAULT_TOOL_TIMEOUT,
    CallContextFactory,
    ToolManager,
    get_tool_manager,
)
from sagents.tool.tool_progress import (
    emit_tool_progress,
    emit_tool_progress_closed,
    emit_tool_progress_from_thread,
)

__all__ = [
    "APPROVAL_ANSWERS",
    "DEFAULT_TOOL_TIMEOUT",
    "AllowAllApprover",
    "ApprovalAnswer",
    "ApprovalKind",
    "ApprovalRequest",
    "Approver",
    "CallContextFactory",
    "Decision",
    "DecisionKind",
    "DenyAllApprover",
    "ExplainsDenial",
    "HookDecision",
    "InjectedArg",
    "LocalTool",
    "SessionContext",
    "SpecProvider",
    "ToolCall",
    "ToolHandler",
    "ToolManager",
    "ToolMiddleware",
    "ToolProvider",
    "ToolProxy",
    "ToolRequest",
    "ToolResult",
    "ToolSpec",
    "approval_needed",
    "build_local_tool",
    "denial_reason",
    "emit_tool_progress",
    "emit_tool_progress_closed",
    "emit_tool_progress_from_thread",
    "get_tool_manager",
    "settle_answer",
    "tool",
]

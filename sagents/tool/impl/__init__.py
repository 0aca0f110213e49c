"""sagents' built-in tools: shell (``execute_shell_command``, ``await_shell``, ``kill_shell``)
and files (``file_read``, ``file_write``, ``file_update``, ``list_dir``, ``glob``, ``grep``),
all running on the session's sandbox (issue 4 §3; docs/builtin_tools.md).

``register_builtin_tools(manager, sandbox_for_session)`` registers them as ``(ToolSpec,
handler)`` pairs with ``source=ToolSource(kind="builtin")``.
"""

from sagents.tool.impl.builtin import (
    BUILTIN_TOOL_NAMES,
    BuiltinTools,
    SandboxResolver,
    register_builtin_tools,
    single_sandbox,
)
from sagents.tool.impl.output import OutputFollower, tail_delta
from sagents.tool.impl.settings import BuiltinSettings

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "BuiltinSettings",
    "BuiltinTools",
    "OutputFollower",
    "SandboxResolver",
    "register_builtin_tools",
    "single_sandbox",
    "tail_delta",
]

"""The shell tools: ``execute_shell_command`` runs a command in the session's sandbox,
``await_shell`` waits for one still running, ``kill_shell`` stops it (docs/builtin_tools.md).
The commands that act follow the host's ``shell_permission``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagents.core._result import ToolResult
from sagents.tool._handler import ToolCall
from sagents.tool.impl._tools._schema import PATH, TASK_ID, WAIT
from sagents.tool.impl._unit import BuiltinTool, object_schema

if TYPE_CHECKING:
    from sagents.tool.impl._builtin import BuiltinTools

__all__ = ["TOOLS"]


async def _execute_shell_command(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    a = arguments
    return await tools.shell.execute(
        await tools.sandbox(call.session_context),
        call,
        command=a["command"],
        wait_seconds=a.get("wait_seconds"),
        cwd=a.get("cwd"),
        timeout_seconds=a.get("timeout_seconds"),
    )


async def _await_shell(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    return await tools.shell.await_task(
        call, task_id=arguments["task_id"], wait_seconds=arguments.get("wait_seconds")
    )


async def _kill_shell(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return await tools.shell.kill_task(call, task_id=arguments["task_id"])


TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        name="execute_shell_command",
        description="Run a shell command in the sandboxed workspace. Waits up to "
        "wait_seconds; returns the exit code and the end of the output (with the total size and "
        "the log path), or a task_id if it is still running.",
        input_schema=object_schema(
            {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Shell command, run with /bin/sh -c in the workspace.",
                },
                "wait_seconds": WAIT,
                "cwd": {**PATH, "description": "Working directory (default: the workspace)."},
                "timeout_seconds": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Kill the command after this many seconds (default: the "
                    "sandbox's limit).",
                },
            },
            ["command"],
        ),
        run=_execute_shell_command,
        permission="shell",
        default=True,
    ),
    BuiltinTool(
        name="await_shell",
        description="Wait for a command started by execute_shell_command; returns its exit code "
        "and the end of its output, or says it is still running.",
        input_schema=object_schema({"task_id": TASK_ID, "wait_seconds": WAIT}, ["task_id"]),
        run=_await_shell,
        permission="read_only",
        idempotent=True,
        default=True,
    ),
    BuiltinTool(
        name="kill_shell",
        description="Stop a command started by execute_shell_command (its whole process tree).",
        input_schema=object_schema({"task_id": TASK_ID}, ["task_id"]),
        run=_kill_shell,
        permission="shell",
        default=True,
    ),
)

"""The session's task list: ``todo_write``, ``todo_read`` (no sandbox; docs/builtin_tools.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagents.core._result import ToolResult
from sagents.tool._handler import ToolCall
from sagents.tool.impl._todo import todo_tool
from sagents.tool.impl._unit import BuiltinTool, object_schema

if TYPE_CHECKING:
    from sagents.tool.impl._builtin import BuiltinTools

__all__ = ["TOOLS"]


async def _todo_write(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return await todo_tool(tools.todo, "todo_write", arguments, call)


async def _todo_read(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return await todo_tool(tools.todo, "todo_read", arguments, call)


TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        name="todo_write",
        description="Create or update the session's task list (shared by the agents of this "
        "session): ids, content, status, owner, blocked_by.",
        input_schema=object_schema(
            {
                "items": {
                    "type": "array",
                    "description": "Items to write. In update mode an item with a known id changes "
                    "only the fields given; a new id adds an item.",
                    "items": object_schema(
                        {
                            "id": {"type": "string", "minLength": 1, "maxLength": 64},
                            "content": {"type": "string", "minLength": 1},
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "done", "cancelled"],
                            },
                            "owner": {
                                "type": "string",
                                "description": "The agent in charge (default: the caller, for a "
                                "new item).",
                            },
                            "blocked_by": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "Ids of items that must be done first.",
                            },
                        },
                        [],
                    ),
                },
                "mode": {
                    "type": "string",
                    "enum": ["update", "replace"],
                    "description": "update (default): change and add items by id; replace: the "
                    "items become the whole list.",
                },
            },
            ["items"],
        ),
        run=_todo_write,
        needs_sandbox=False,
    ),
    BuiltinTool(
        name="todo_read",
        description="Read the session's task list.",
        input_schema=object_schema({}, []),
        run=_todo_read,
        permission="read_only",
        idempotent=True,
        needs_sandbox=False,
    ),
)

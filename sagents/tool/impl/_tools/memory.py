"""Long-term memory: ``memory_store``, ``memory_search``, ``memory_delete`` (no sandbox; the
store is the host's, docs/builtin_tools.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagents.core._result import ToolResult
from sagents.tool._handler import ToolCall
from sagents.tool.impl._memory import memory_tool
from sagents.tool.impl._unit import BuiltinTool, object_schema

if TYPE_CHECKING:
    from sagents.tool.impl._builtin import BuiltinTools

__all__ = ["TOOLS"]


async def _memory_store(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    return await memory_tool(tools.memory, "memory_store", arguments, call)


async def _memory_search(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    return await memory_tool(tools.memory, "memory_search", arguments, call)


async def _memory_delete(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    return await memory_tool(tools.memory, "memory_delete", arguments, call)


TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        name="memory_store",
        description="Remember a fact for later conversations with this user (long-term "
        "memory); storing the same text again only merges its tags.",
        input_schema=object_schema(
            {
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The fact to remember, self-contained (it is read later "
                    "without this conversation).",
                },
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels."},
                "scope": {
                    "type": "string",
                    "enum": ["agent", "user"],
                    "description": "agent (default): only this agent finds it; user: every agent "
                    "of this user does.",
                },
            },
            ["content"],
        ),
        run=_memory_store,
        needs_sandbox=False,
    ),
    BuiltinTool(
        name="memory_search",
        description="Search your long-term memories of this user; best matches first.",
        input_schema=object_schema(
            {
                "query": {"type": "string", "minLength": 1, "description": "Words to look for."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "description": "Results at most (default 5).",
                },
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Only memories with all these tags.",
                },
            },
            ["query"],
        ),
        run=_memory_search,
        permission="read_only",
        idempotent=True,
        needs_sandbox=False,
    ),
    BuiltinTool(
        name="memory_delete",
        description="Forget one long-term memory by id.",
        input_schema=object_schema(
            {"id": {"type": "string", "minLength": 1, "description": "The memory's id."}}, ["id"]
        ),
        run=_memory_delete,
        idempotent=True,
        needs_sandbox=False,
    ),
)

"""The tools that act on the conversation: ``compress_history`` (the agent loop's history,
summarised) and ``questionnaire`` (structured questions to the user); neither needs a sandbox
(docs/builtin_tools.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagents.core._result import ToolResult
from sagents.tool._handler import ToolCall
from sagents.tool.impl._history import compress_history_tool
from sagents.tool.impl._questionnaire import ask_questionnaire
from sagents.tool.impl._unit import BuiltinTool, object_schema

if TYPE_CHECKING:
    from sagents.tool.impl._builtin import BuiltinTools

__all__ = ["TOOLS"]


async def _compress_history(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    return await compress_history_tool(arguments, call)


async def _questionnaire(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    return await ask_questionnaire(arguments, call, tools.questionnaire)


TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        name="compress_history",
        description="Summarise the older part of this conversation to free context; the "
        "latest turns, the todo list and loaded skills are kept.",
        input_schema=object_schema(
            {
                "focus": {
                    "type": "string",
                    "maxLength": 2000,
                    "description": "What the summary must keep (decisions, open questions...).",
                }
            },
            [],
        ),
        run=_compress_history,
        permission="read_only",
        needs_sandbox=False,
        not_served=(
            "the MCP client keeps the conversation; it works in the agent loop (SAgent, "
            "sagents chat)"
        ),
    ),
    BuiltinTool(
        name="questionnaire",
        description="Ask the user structured questions (single or multiple choice, free text, "
        "number) and wait for the answers; the result may say the user declined, cancelled or did "
        "not answer in time.",
        input_schema=object_schema(
            {
                "title": {"type": "string", "maxLength": 200, "description": "A short heading."},
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 20,
                    "items": object_schema(
                        {
                            "id": {
                                "type": "string",
                                "pattern": "^[A-Za-z0-9_-]{1,64}$",
                                "description": "The answer's key.",
                            },
                            "kind": {
                                "type": "string",
                                "enum": ["single_choice", "multiple_choice", "text", "number"],
                            },
                            "prompt": {"type": "string", "minLength": 1, "maxLength": 2000},
                            "options": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "The choices (choice kinds: two or more).",
                            },
                            "required": {"type": "boolean", "description": "Default true."},
                            "default": {
                                "type": ["string", "number", "array"],
                                "items": {"type": "string"},
                                "description": "An option, a list of options, text or a number.",
                            },
                            "minimum": {"type": "number"},
                            "maximum": {"type": "number"},
                            "integer": {
                                "type": "boolean",
                                "description": "A number question wants a whole number.",
                            },
                        },
                        ["id", "kind", "prompt"],
                    ),
                },
                "timeout_seconds": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "How long the user has (default 240).",
                },
            },
            ["questions"],
        ),
        run=_questionnaire,
        permission="read_only",
        needs_sandbox=False,
    ),
)

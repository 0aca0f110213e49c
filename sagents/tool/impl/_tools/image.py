"""``image_understanding``: a workspace image and a question, answered by the host's vision model
(docs/builtin_tools.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagents.core._result import ToolResult
from sagents.tool._handler import ToolCall
from sagents.tool.impl._tools._schema import PATH
from sagents.tool.impl._unit import BuiltinTool, object_schema

if TYPE_CHECKING:
    from sagents.tool.impl._builtin import BuiltinTools

__all__ = ["TOOLS"]


async def _image_understanding(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    return await tools.images.run(
        await tools.sandbox(call.session_context),
        path=arguments["path"],
        question=arguments.get("question"),
        detail=arguments.get("detail", "auto"),
    )


TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        name="image_understanding",
        description="Look at an image file of the workspace (PNG, JPEG, WebP, GIF) and "
        "answer a question about it with a vision model.",
        input_schema=object_schema(
            {
                "path": {**PATH, "description": "The image file (PNG, JPEG, WebP or GIF)."},
                "question": {
                    "type": "string",
                    "maxLength": 8000,
                    "description": "What to find out about the image (default: describe it).",
                },
                "detail": {
                    "type": "string",
                    "enum": ["auto", "low", "high"],
                    "description": "How closely the model looks (default auto).",
                },
            },
            ["path"],
        ),
        run=_image_understanding,
        permission="read_only",
        idempotent=True,
    ),
)

"""``web_fetch``: a public web page or file by URL, fetched on the host behind an address guard
(the sandbox only for ``save_to``; docs/builtin_tools.md).
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


async def _web_fetch(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    save_to = arguments.get("save_to")
    return await tools.web.run(
        url=arguments["url"],
        format=arguments.get("format", "markdown"),
        max_chars=arguments.get("max_chars"),
        save_to=save_to,
        context=call.session_context,
        sandbox=None if save_to is None else await tools.sandbox(call.session_context),
    )


TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        name="web_fetch",
        description="Fetch a public web page or file by URL; returns its title, final URL, "
        "content type and text (HTML as markdown by default), cut at max_chars.",
        input_schema=object_schema(
            {
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 8192,
                    "description": "The http or https URL to fetch.",
                },
                "format": {
                    "type": "string",
                    "enum": ["markdown", "text", "html"],
                    "description": "How an HTML page is returned (default markdown).",
                },
                "max_chars": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 200000,
                    "description": "Characters of content returned at most (default 20000).",
                },
                "save_to": {
                    **PATH,
                    "description": "Also save the whole body (as received, decompressed) to this "
                    "workspace file.",
                },
            },
            ["url"],
        ),
        run=_web_fetch,
        permission="read_only",
        idempotent=True,
        open_world=True,
        needs_sandbox=False,
    ),
)

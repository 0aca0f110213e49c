"""The file tools on the session's sandbox: ``file_read``, ``file_write``, ``file_update``,
``list_dir``, ``glob``, ``grep`` (docs/builtin_tools.md).
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


async def _file_read(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return await tools.files.read(
        await tools.sandbox(call.session_context),
        path=arguments["path"],
        start_line=arguments.get("start_line", 1),
        end_line=arguments.get("end_line"),
    )


async def _file_write(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return await tools.files.write(
        await tools.sandbox(call.session_context),
        path=arguments["path"],
        content=arguments["content"],
        create_dirs=arguments.get("create_dirs", True),
    )


async def _file_update(
    tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall
) -> ToolResult:
    sandbox = await tools.sandbox(call.session_context)
    return await tools.files.update(sandbox, path=arguments["path"], edits=list(arguments["edits"]))


async def _list_dir(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    sandbox = await tools.sandbox(call.session_context)
    return await tools.files.list_dir(sandbox, path=arguments.get("path", "."))


async def _glob(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    sandbox = await tools.sandbox(call.session_context)
    return await tools.files.glob(sandbox, pattern=arguments["pattern"])


async def _grep(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return await tools.files.grep(
        await tools.sandbox(call.session_context),
        pattern=arguments["pattern"],
        path=arguments.get("path", "."),
        include=arguments.get("include"),
        ignore_case=arguments.get("ignore_case", False),
    )


TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        name="file_read",
        description="Read a text file of the workspace, with line numbers; use start_line/end_line "
        "for parts of long files.",
        input_schema=object_schema(
            {
                "path": PATH,
                "start_line": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "First line (1-based).",
                },
                "end_line": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Last line, inclusive (default: 2000 lines from start_line).",
                },
            },
            ["path"],
        ),
        run=_file_read,
        permission="read_only",
        idempotent=True,
        default=True,
    ),
    BuiltinTool(
        name="file_write",
        description="Create or replace a file of the workspace with the given content (atomic).",
        input_schema=object_schema(
            {
                "path": PATH,
                "content": {"type": "string", "description": "The whole new content (UTF-8)."},
                "create_dirs": {
                    "type": "boolean",
                    "description": "Create missing parent directories (default true).",
                },
            },
            ["path", "content"],
        ),
        run=_file_write,
        idempotent=True,
        default=True,
    ),
    BuiltinTool(
        name="file_update",
        description="Edit a file by exact text replacement: each old_text must occur exactly "
        "once (or set replace_all). All edits apply, or none.",
        input_schema=object_schema(
            {
                "path": PATH,
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Replacements applied in order; the file is written only if "
                    "every one applies.",
                    "items": object_schema(
                        {
                            "old_text": {
                                "type": "string",
                                "minLength": 1,
                                "description": "Exact text to replace (must occur exactly once "
                                "unless replace_all).",
                            },
                            "new_text": {"type": "string"},
                            "replace_all": {"type": "boolean"},
                        },
                        ["old_text", "new_text"],
                    ),
                },
            },
            ["path", "edits"],
        ),
        run=_file_update,
        default=True,
    ),
    BuiltinTool(
        name="list_dir",
        description="List a directory of the workspace (directories end with /).",
        input_schema=object_schema(
            {"path": {**PATH, "description": "Directory (default: workspace)."}}, []
        ),
        run=_list_dir,
        permission="read_only",
        idempotent=True,
        default=True,
    ),
    BuiltinTool(
        name="glob",
        description="Find workspace paths matching a glob pattern (** spans directories).",
        input_schema=object_schema(
            {
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Glob relative to the workspace; ** spans directories "
                    "(e.g. src/**/*.py).",
                }
            },
            ["pattern"],
        ),
        run=_glob,
        permission="read_only",
        idempotent=True,
        default=True,
    ),
    BuiltinTool(
        name="grep",
        description="Search text files of the workspace for a regular expression; returns "
        "path:line:text for each matching line.",
        input_schema=object_schema(
            {
                "pattern": {"type": "string", "minLength": 1, "description": "Python regex."},
                "path": {
                    **PATH,
                    "description": "File or directory to search (default: workspace).",
                },
                "include": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Only files whose name or relative path matches this glob.",
                },
                "ignore_case": {"type": "boolean"},
            },
            ["pattern"],
        ),
        run=_grep,
        permission="read_only",
        idempotent=True,
        default=True,
    ),
)

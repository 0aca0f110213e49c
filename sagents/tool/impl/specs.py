"""Input schemas and descriptions of the built-in tools (what the model sees).

Schemas are JSON Schema Draft 7 objects, validated by the ``ToolManager`` before a handler
runs, so handlers receive well-typed arguments; ranges the schema cannot express (``end_line``
before ``start_line``) are checked by the tools.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DESCRIPTIONS", "SCHEMAS", "describe_tool"]

_PATH = {
    "type": "string",
    "minLength": 1,
    "description": "Path relative to the workspace (or absolute inside it).",
}
_WAIT = {
    "type": "number",
    "minimum": 0,
    "description": "Seconds to block waiting for the command to finish (0: return at once). "
    "Default 30. The command keeps running in the background when the wait ends.",
}
_TASK_ID = {
    "type": "string",
    "minLength": 1,
    "description": "The task_id that execute_shell_command returned.",
}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "execute_shell_command": _object(
        {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": "Shell command, run with /bin/sh -c in the workspace.",
            },
            "wait_seconds": _WAIT,
            "cwd": {**_PATH, "description": "Working directory (default: the workspace)."},
            "timeout_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Kill the command after this many seconds (default: the "
                "sandbox's limit).",
            },
        },
        ["command"],
    ),
    "await_shell": _object({"task_id": _TASK_ID, "wait_seconds": _WAIT}, ["task_id"]),
    "kill_shell": _object({"task_id": _TASK_ID}, ["task_id"]),
    "file_read": _object(
        {
            "path": _PATH,
            "start_line": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            "end_line": {
                "type": "integer",
                "minimum": 1,
                "description": "Last line, inclusive (default: 2000 lines from start_line).",
            },
        },
        ["path"],
    ),
    "file_write": _object(
        {
            "path": _PATH,
            "content": {"type": "string", "description": "The whole new content (UTF-8)."},
            "create_dirs": {
                "type": "boolean",
                "description": "Create missing parent directories (default true).",
            },
        },
        ["path", "content"],
    ),
    "file_update": _object(
        {
            "path": _PATH,
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": "Replacements applied in order; the file is written only if "
                "every one applies.",
                "items": _object(
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
    "list_dir": _object({"path": {**_PATH, "description": "Directory (default: workspace)."}}, []),
    "glob": _object(
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
    "grep": _object(
        {
            "pattern": {"type": "string", "minLength": 1, "description": "Python regex."},
            "path": {**_PATH, "description": "File or directory to search (default: workspace)."},
            "include": {
                "type": "string",
                "minLength": 1,
                "description": "Only files whose name or relative path matches this glob.",
            },
            "ignore_case": {"type": "boolean"},
        },
        ["pattern"],
    ),
}

DESCRIPTIONS: dict[str, str] = {
    "execute_shell_command": "Run a shell command in the sandboxed workspace. Waits up to "
    "wait_seconds; returns the exit code and the end of the output (with the total size and "
    "the log path), or a task_id if it is still running.",
    "await_shell": "Wait for a command started by execute_shell_command; returns its exit code "
    "and the end of its output, or says it is still running.",
    "kill_shell": "Stop a command started by execute_shell_command (its whole process tree).",
    "file_read": "Read a text file of the workspace, with line numbers; use start_line/end_line "
    "for parts of long files.",
    "file_write": "Create or replace a file of the workspace with the given content (atomic).",
    "file_update": "Edit a file by exact text replacement: each old_text must occur exactly "
    "once (or set replace_all). All edits apply, or none.",
    "list_dir": "List a directory of the workspace (directories end with /).",
    "glob": "Find workspace paths matching a glob pattern (** spans directories).",
    "grep": "Search text files of the workspace for a regular expression; returns "
    "path:line:text for each matching line.",
}


def describe_tool(name: str) -> str:
    """The description of built-in tool ``name`` (KeyError for another name)."""
    return DESCRIPTIONS[name]

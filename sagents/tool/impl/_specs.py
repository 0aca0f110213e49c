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
    "web_fetch": _object(
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
                **_PATH,
                "description": "Also save the whole body (as received, decompressed) to this "
                "workspace file.",
            },
        },
        ["url"],
    ),
    "memory_store": _object(
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
    "memory_search": _object(
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
    "memory_delete": _object(
        {"id": {"type": "string", "minLength": 1, "description": "The memory's id."}}, ["id"]
    ),
    "todo_write": _object(
        {
            "items": {
                "type": "array",
                "description": "Items to write. In update mode an item with a known id changes "
                "only the fields given; a new id adds an item.",
                "items": _object(
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
    "todo_read": _object({}, []),
    "image_understanding": _object(
        {
            "path": {**_PATH, "description": "The image file (PNG, JPEG, WebP or GIF)."},
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
    "compress_history": _object(
        {
            "focus": {
                "type": "string",
                "maxLength": 2000,
                "description": "What the summary must keep (decisions, open questions...).",
            }
        },
        [],
    ),
    "questionnaire": _object(
        {
            "title": {"type": "string", "maxLength": 200, "description": "A short heading."},
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": 20,
                "items": _object(
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
    "web_fetch": "Fetch a public web page or file by URL; returns its title, final URL, "
    "content type and text (HTML as markdown by default), cut at max_chars.",
    "memory_store": "Remember a fact for later conversations with this user (long-term "
    "memory); storing the same text again only merges its tags.",
    "memory_search": "Search your long-term memories of this user; best matches first.",
    "memory_delete": "Forget one long-term memory by id.",
    "todo_write": "Create or update the session's task list (shared by the agents of this "
    "session): ids, content, status, owner, blocked_by.",
    "todo_read": "Read the session's task list.",
    "image_understanding": "Look at an image file of the workspace (PNG, JPEG, WebP, GIF) and "
    "answer a question about it with a vision model.",
    "compress_history": "Summarise the older part of this conversation to free context; the "
    "latest turns, the todo list and loaded skills are kept.",
    "questionnaire": "Ask the user structured questions (single or multiple choice, free text, "
    "number) and wait for the answers; the result may say the user declined, cancelled or did "
    "not answer in time.",
}


def describe_tool(name: str) -> str:
    """The description of built-in tool ``name`` (KeyError for another name)."""
    return DESCRIPTIONS[name]

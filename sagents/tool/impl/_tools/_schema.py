"""JSON Schema pieces several built-in tools share."""

from __future__ import annotations

__all__ = ["PATH", "TASK_ID", "WAIT"]

PATH = {
    "type": "string",
    "minLength": 1,
    "description": "Path relative to the workspace (or absolute inside it).",
}
WAIT = {
    "type": "number",
    "minimum": 0,
    "description": "Seconds to block waiting for the command to finish (0: return at once). "
    "Default 30. The command keeps running in the background when the wait ends.",
}
TASK_ID = {
    "type": "string",
    "minLength": 1,
    "description": "The task_id that execute_shell_command returned.",
}

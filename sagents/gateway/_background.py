"""Background calls of the gateway (``script_status`` / ``script_cancel``).

The registry lives in :mod:`sagents.tool._background` (floor 3), so that run_script (floor 4) can
share it; this module re-exports it for the gateway.
"""

from sagents.tool._background import (
    CANCEL_TOOL,
    STATUS_TOOL,
    TASK_URI_PREFIX,
    BackgroundRegistry,
    BackgroundTasks,
    TaskInfo,
    TaskStatus,
    handed_off_result,
    task_json,
    task_tools,
)

__all__ = [
    "CANCEL_TOOL",
    "STATUS_TOOL",
    "TASK_URI_PREFIX",
    "BackgroundRegistry",
    "BackgroundTasks",
    "TaskInfo",
    "TaskStatus",
    "handed_off_result",
    "task_json",
    "task_tools",
]

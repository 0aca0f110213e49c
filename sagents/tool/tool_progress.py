"""The public entry point for live tool output (docs/progress.md).

``from sagents.tool.tool_progress import emit_tool_progress`` keeps working; the code lives in
:mod:`sagents.progress` (floor 2), and the binding that the ToolManager calls around each tool
call is :func:`sagents.progress.bind_tool_call`. Sync tools in worker threads use
:func:`emit_tool_progress_from_thread`.
"""

from sagents.progress._binding import (
    emit_tool_progress,
    emit_tool_progress_closed,
    emit_tool_progress_from_thread,
)

__all__ = ["emit_tool_progress", "emit_tool_progress_closed", "emit_tool_progress_from_thread"]

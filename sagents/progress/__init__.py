"""The live progress channel: typed events, per-consumer bounded queues, coalescing, NDJSON.

Floor 2 of ``docs/architecture.md`` ("Layers"); see docs/progress.md. The pieces:

* :class:`ProgressHub` routes each session's events to its consumers' :class:`EventQueue`
  (fan-out; overflow policy in :mod:`sagents.progress._queue`); :func:`default_hub` is the
  process default behind :func:`register_progress_queue`, :func:`unregister_progress_queue` and
  :func:`subscribe`.
* :func:`bind_tool_call` binds :func:`emit_tool_progress` / :func:`emit_tool_progress_closed` to
  a running tool call, with coalescing per (tool_call_id, stream).
* :class:`ScriptProgressThrottle` keeps ``script.progress`` to one snapshot per second.
* :func:`interleave_message_and_progress` merges messages and events into NDJSON lines.
"""

from sagents.progress._binding import (
    ToolCallBinding,
    bind_tool_call,
    current_tool_call,
    emit_tool_progress,
    emit_tool_progress_closed,
    emit_tool_progress_from_thread,
)
from sagents.progress._clock import Clock, ManualClock, SystemClock
from sagents.progress._hub import (
    ProgressHub,
    default_hub,
    register_progress_queue,
    subscribe,
    unregister_progress_queue,
)
from sagents.progress._interleave import event_to_ndjson, interleave_message_and_progress
from sagents.progress._queue import EventQueue, QueueStats
from sagents.progress._settings import ProgressSettings
from sagents.progress._throttle import ScriptProgressThrottle

__all__ = [
    "Clock",
    "EventQueue",
    "ManualClock",
    "ProgressHub",
    "ProgressSettings",
    "QueueStats",
    "ScriptProgressThrottle",
    "SystemClock",
    "ToolCallBinding",
    "bind_tool_call",
    "current_tool_call",
    "default_hub",
    "emit_tool_progress",
    "emit_tool_progress_closed",
    "emit_tool_progress_from_thread",
    "event_to_ndjson",
    "interleave_message_and_progress",
    "register_progress_queue",
    "subscribe",
    "unregister_progress_queue",
]

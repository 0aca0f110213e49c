"""sagents' built-in tools: shell (``execute_shell_command``, ``await_shell``, ``kill_shell``)
and files (``file_read``, ``file_write``, ``file_update``, ``list_dir``, ``glob``, ``grep``),
all running on the session's sandbox; ``web_fetch`` (on the host, behind an address guard);
long-term memory (``memory_store``, ``memory_search``, ``memory_delete``) and the session's task
list (``todo_write``, ``todo_read``) in SQLite; ``image_understanding`` (a workspace image and a
question to a vision model), ``compress_history`` (the agent loop's history, summarised) and
``questionnaire`` (structured questions to the user); ``datetime_now`` (the clock)
(docs/builtin_tools.md).

``register_builtin_tools(manager, sandbox_for_session)`` registers them as ``(ToolSpec,
handler)`` pairs with ``source=ToolSource(kind="builtin")``.

The names load on first use (``sagents.core._lazy``): an agent run that reads one of them (the
questionnaire's settings) does not import the HTTP stack of ``web_fetch`` or the sandboxes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagents.core._lazy import lazy_names

if TYPE_CHECKING:
    from sagents.tool.impl._builtin import (
        BUILTIN_TOOL_NAMES,
        DEFAULT_BUILTIN_TOOL_NAMES,
        BuiltinTools,
        SandboxResolver,
        register_builtin_tools,
        single_sandbox,
    )
    from sagents.tool.impl._image import ImageSettings, ImageUnderstanding, VisionModel
    from sagents.tool.impl._memory import Memory, MemoryLimits, MemoryStore
    from sagents.tool.impl._output import OutputFollower, tail_delta
    from sagents.tool.impl._questionnaire import QuestionnaireSettings
    from sagents.tool.impl._settings import BuiltinSettings
    from sagents.tool.impl._todo import TodoItem, TodoStore
    from sagents.tool.impl._web_fetch import WebFetcher, WebFetchSettings

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_BUILTIN_TOOL_NAMES",
    "BuiltinSettings",
    "BuiltinTools",
    "ImageSettings",
    "ImageUnderstanding",
    "Memory",
    "MemoryLimits",
    "MemoryStore",
    "OutputFollower",
    "QuestionnaireSettings",
    "SandboxResolver",
    "TodoItem",
    "TodoStore",
    "VisionModel",
    "WebFetchSettings",
    "WebFetcher",
    "register_builtin_tools",
    "single_sandbox",
    "tail_delta",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "BUILTIN_TOOL_NAMES": "_builtin",
        "BuiltinSettings": "_settings",
        "BuiltinTools": "_builtin",
        "DEFAULT_BUILTIN_TOOL_NAMES": "_builtin",
        "ImageSettings": "_image",
        "ImageUnderstanding": "_image",
        "Memory": "_memory",
        "MemoryLimits": "_memory",
        "MemoryStore": "_memory",
        "OutputFollower": "_output",
        "QuestionnaireSettings": "_questionnaire",
        "SandboxResolver": "_builtin",
        "TodoItem": "_todo",
        "TodoStore": "_todo",
        "VisionModel": "_image",
        "WebFetchSettings": "_web_fetch",
        "WebFetcher": "_web_fetch",
        "register_builtin_tools": "_builtin",
        "single_sandbox": "_builtin",
        "tail_delta": "_output",
    },
)

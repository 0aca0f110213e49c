"""The built-in tools ``sagents chat`` offers from the configuration (``builtinTools.enabled``,
docs/agent.md, "sagents chat").

The chat has no sandbox of its own, so it offers the built-in tools that need none (those
without ``BuiltinTool.needs_sandbox``: ``web_fetch`` without ``save_to``, memory, the todo
list, ``compress_history``...; ``questionnaire`` is offered whenever the chat can ask, named or
not). The others are skipped with a warning on stderr.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from sagents.agent import ChatModel
from sagents.cli._rich import stderr_console
from sagents.config._loader import SagentsConfig
from sagents.config.tools import build_tool_manager
from sagents.tool.impl import MemoryStore, register_builtin_tools
from sagents.tool.impl._builtin import BUILTINS
from sagents.tool.tool_manager import ToolManager

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CHAT_BUILTIN_TOOL_NAMES", "open_chat_tools", "register_chat_builtins"]

CHAT_BUILTIN_TOOL_NAMES: tuple[str, ...] = tuple(b.name for b in BUILTINS if not b.needs_sandbox)
"""The built-in tools that work without a sandbox."""


def register_chat_builtins(
    manager: ToolManager,
    config: SagentsConfig | None,
    *,
    questionnaire: bool,
    console: Console | None = None,
) -> list[str]:
    """Register the configured built-in tools the chat can run (and ``questionnaire`` when it
    can ask); return their names. A name another tool already has is left to that tool."""
    wanted = list(config.builtin_tools) if config is not None else []
    if questionnaire and "questionnaire" not in wanted:
        wanted.append("questionnaire")
    skipped = [name for name in wanted if name not in CHAT_BUILTIN_TOOL_NAMES]
    if skipped:
        (console or stderr_console()).print(
            f"built-in tools {', '.join(skipped)} need a sandbox: not offered in sagents chat",
            style="yellow",
        )
    names = [n for n in wanted if n in CHAT_BUILTIN_TOOL_NAMES and not manager.has_tool(n)]
    if names:
        register_builtin_tools(
            manager,
            None,
            names=names,
            web_fetch=config.web_fetch if config is not None else None,
            memory=MemoryStore(
                anonymous_user=config.memory_anonymous_user if config is not None else None
            ),
        )
    return names


@asynccontextmanager
async def open_chat_tools(
    model: ChatModel, config: SagentsConfig | None, *, questionnaire: bool
) -> AsyncIterator[ToolManager]:
    """The chat's tools (the config's servers and the built-ins above), open; leaving closes
    them and the model's client."""
    async with AsyncExitStack() as stack:
        stack.push_async_callback(model.aclose)
        if config is not None:
            manager = await stack.enter_async_context(await build_tool_manager(config))
        else:
            manager = await stack.enter_async_context(ToolManager())
        register_chat_builtins(manager, config, questionnaire=questionnaire)
        yield manager

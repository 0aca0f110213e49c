"""``BuiltinTools`` / ``register_builtin_tools``: the built-in tools as ``(ToolSpec, handler)``
pairs for a :class:`~sagents.tool.ToolManager` (docs/builtin_tools.md).

The registry is :data:`BUILTINS`, a list of :class:`~sagents.tool.impl._unit.BuiltinTool`
values, each declared in its module under ``_tools/`` with everything about it (schema,
permission, sandbox, where it is offered, how it runs); the name lists below are read from it.

Each call finds its sandbox through ``sandbox_for_session(session_context)``, an async callable
the host supplies (one sandbox per ``SessionContext.session_id``, typically); the tools never
touch the host filesystem themselves. Permission classes: ``file_read``, ``list_dir``, ``glob``,
``grep`` and ``await_shell`` are ``read_only``; ``file_write``, ``file_update``,
``execute_shell_command`` and ``kill_shell`` are ``write`` (the shell runs inside the sandbox,
where it can change nothing that ``file_write`` could not; see the docs for the reasoning and
for ``shell_permission`` with an unisolated sandbox).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sagents.core._permissions import PermissionClass
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import (
    FileMissingError,
    FileToolError,
    InvalidArgumentsError,
    SandboxUnavailableError,
)
from sagents.sandbox import Sandbox
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall, ToolHandler
from sagents.tool.impl._files import FileTools
from sagents.tool.impl._image import ImageSettings, ImageUnderstanding, VisionModel
from sagents.tool.impl._memory import MemoryStore
from sagents.tool.impl._questionnaire import QuestionnaireSettings
from sagents.tool.impl._settings import BuiltinSettings
from sagents.tool.impl._shell import ShellTasks
from sagents.tool.impl._todo import TodoStore
from sagents.tool.impl._tools import clock, conversation, files, image, memory, shell, todo, web
from sagents.tool.impl._unit import BuiltinTool
from sagents.tool.impl._web_fetch import WebFetcher, WebFetchSettings
from sagents.tool.tool_manager import ToolManager

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_BUILTIN_TOOL_NAMES",
    "BuiltinTools",
    "SandboxResolver",
    "register_builtin_tools",
    "single_sandbox",
]

SandboxResolver = Callable[[SessionContext], Awaitable[Sandbox]]
"""Returns the sandbox of the calling session (the host decides how sessions map to them)."""

BUILTINS: tuple[BuiltinTool, ...] = (
    *shell.TOOLS,
    *files.TOOLS,
    *web.TOOLS,
    *memory.TOOLS,
    *todo.TOOLS,
    *image.TOOLS,
    *conversation.TOOLS,
    *clock.TOOLS,
)
"""Every built-in tool, in the order they are listed."""

_BY_NAME: dict[str, BuiltinTool] = {builtin.name: builtin for builtin in BUILTINS}

DEFAULT_BUILTIN_TOOL_NAMES: tuple[str, ...] = tuple(b.name for b in BUILTINS if b.default)
"""The shell and file tools: what ``names=None`` registers."""

BUILTIN_TOOL_NAMES: tuple[str, ...] = tuple(_BY_NAME)
"""Every built-in tool; those after the shell and file tools are offered only when named
(``names=[...]``)."""


def builtin_tool(name: str) -> BuiltinTool:
    """The built-in tool ``name``.

    Raises:
        KeyError: for a name that is not a built-in tool.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"no built-in tool {name!r}; known: {', '.join(BUILTIN_TOOL_NAMES)}"
        ) from None


def single_sandbox(sandbox: Sandbox) -> SandboxResolver:
    """A resolver that gives every session the same sandbox (a CLI, a single-user host)."""

    async def resolve(context: SessionContext) -> Sandbox:
        return sandbox

    return resolve


def _path_of(arguments: dict[str, Any]) -> str:
    for key in ("path", "cwd", "save_to"):
        if key in arguments:
            return str(arguments[key])
    return "."


@dataclass(frozen=True, kw_only=True)
class _Handler:
    builtin: BuiltinTool
    tools: BuiltinTools

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        try:
            return await self.builtin.run(self.tools, arguments, call)
        except FileNotFoundError as error:
            raise FileMissingError(
                f"{_path_of(arguments)!r} does not exist",
                hint="paths are relative to the workspace; use list_dir or glob to find files",
                details={"path": _path_of(arguments)},
            ) from error
        except NotADirectoryError as error:
            raise FileToolError(
                f"{_path_of(arguments)!r}: a component of the path is not a directory",
                details={"path": _path_of(arguments)},
            ) from error
        except IsADirectoryError as error:
            raise FileToolError(
                f"{_path_of(arguments)!r} is a directory, not a file",
                hint="use list_dir to see what it holds",
                details={"path": _path_of(arguments)},
            ) from error
        except ValueError as error:
            raise InvalidArgumentsError(str(error)) from error


class BuiltinTools:
    """The built-in shell and file tools, bound to a way of finding each session's sandbox.

    Args:
        sandbox_for_session: Async callable returning the calling session's sandbox.
        settings: Caps and defaults (:class:`BuiltinSettings`).
        shell_permission: Permission class of ``execute_shell_command`` and ``kill_shell``;
            ``write`` by default, ``destructive`` is advised for a ``passthrough`` sandbox.
        web_fetch: Policy and caps of ``web_fetch`` (:class:`WebFetchSettings`).
        memory: The store of ``memory_*`` (a :class:`MemoryStore` on
            ``<data dir>/memory.sqlite3`` when first needed, by default).
        todo: The store of ``todo_*`` (``<data dir>/todo.sqlite3`` by default, beside the
            audit store).
        image_model: The vision model of ``image_understanding`` (an ``OpenAIChatModel``, or
            anything with its ``stream_turn``); without one the tool says none is configured.
        image: Caps of ``image_understanding`` (:class:`ImageSettings`).
        questionnaire: Timeouts of ``questionnaire`` (:class:`QuestionnaireSettings`).
    """

    def __init__(
        self,
        sandbox_for_session: SandboxResolver | None,
        *,
        settings: BuiltinSettings | None = None,
        shell_permission: PermissionClass = "write",
        web_fetch: WebFetchSettings | None = None,
        memory: MemoryStore | None = None,
        todo: TodoStore | None = None,
        image_model: VisionModel | None = None,
        image: ImageSettings | None = None,
        questionnaire: QuestionnaireSettings | None = None,
    ) -> None:
        self.settings = settings or BuiltinSettings()
        self.images = ImageUnderstanding(image_model, image)
        self.questionnaire = questionnaire or QuestionnaireSettings()
        self._resolve = sandbox_for_session
        self._shell_permission: PermissionClass = shell_permission
        self.shell = ShellTasks(self.settings)
        self.files = FileTools(self.settings)
        self.web = WebFetcher(web_fetch)
        self._memory = memory
        self._todo = todo

    @property
    def memory(self) -> MemoryStore:
        """The memory store (the default one is opened on first use)."""
        if self._memory is None:
            self._memory = MemoryStore()
        return self._memory

    @property
    def todo(self) -> TodoStore:
        """The todo store (the default one is opened on first use)."""
        if self._todo is None:
            self._todo = TodoStore()
        return self._todo

    async def sandbox(self, context: SessionContext) -> Sandbox:
        """The sandbox of the calling session.

        Raises:
            SandboxUnavailableError: the host gave the built-in tools no sandbox.
        """
        if self._resolve is None:
            raise SandboxUnavailableError(
                "this host gave the built-in tools no sandbox",
                hint="pass sandbox_for_session to register_builtin_tools",
            )
        return await self._resolve(context)

    def spec(self, name: str) -> ToolSpec:
        """The :class:`ToolSpec` of built-in tool ``name``.

        Raises:
            KeyError: for a name that is not a built-in tool.
        """
        return builtin_tool(name).spec(self._shell_permission)

    def tools(self, names: Iterable[str] | None = None) -> list[tuple[ToolSpec, ToolHandler]]:
        """``(ToolSpec, handler)`` pairs for ``names`` (the shell and file tools by default).

        Raises:
            KeyError: for a name that is not a built-in tool.
        """
        chosen = DEFAULT_BUILTIN_TOOL_NAMES if names is None else tuple(names)
        units = [builtin_tool(name) for name in chosen]
        return [
            (unit.spec(self._shell_permission), _Handler(builtin=unit, tools=self))
            for unit in units
        ]

    def register(
        self, manager: ToolManager, *, names: Iterable[str] | None = None, replace: bool = False
    ) -> list[str]:
        """Register the tools on ``manager``; return their names.

        Raises:
            KeyError: for a name that is not a built-in tool.
            ToolNameConflictError: when a name is taken and ``replace`` is False.
        """
        registered = []
        for spec, handler in self.tools(names):
            manager.register_tool((spec, handler), replace=replace)
            registered.append(spec.name)
        return registered

    async def dispatch(self, name: str, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        """Execute built-in tool ``name`` with validated ``arguments`` for ``call``."""
        return await builtin_tool(name).run(self, arguments, call)


def register_builtin_tools(
    manager: ToolManager,
    sandbox_for_session: SandboxResolver | None,
    *,
    names: Iterable[str] | None = None,
    settings: BuiltinSettings | None = None,
    shell_permission: PermissionClass = "write",
    web_fetch: WebFetchSettings | None = None,
    memory: MemoryStore | None = None,
    todo: TodoStore | None = None,
    image_model: VisionModel | None = None,
    image: ImageSettings | None = None,
    questionnaire: QuestionnaireSettings | None = None,
) -> BuiltinTools:
    """Register the built-in tools on ``manager``, each session finding its own sandbox.

    Args:
        manager: Where to register.
        sandbox_for_session: Async callable ``(SessionContext) -> Sandbox`` (None: only tools
            that need no sandbox, such as ``memory_*`` and ``todo_*``).
        names: A subset of :data:`BUILTIN_TOOL_NAMES` (the shell and file tools,
            :data:`DEFAULT_BUILTIN_TOOL_NAMES`, by default).
        settings: Caps and defaults.
        shell_permission: Permission class of the shell tools that act (see
            :class:`BuiltinTools`).
        web_fetch / memory / todo / image_model / image / questionnaire: See
            :class:`BuiltinTools`.

    Returns:
        The :class:`BuiltinTools` (it holds the sessions' shell tasks).

    Raises:
        KeyError: for a name that is not a built-in tool.
        ToolNameConflictError: when a name is already registered.
    """
    tools = BuiltinTools(
        sandbox_for_session,
        settings=settings,
        shell_permission=shell_permission,
        web_fetch=web_fetch,
        memory=memory,
        todo=todo,
        image_model=image_model,
        image=image,
        questionnaire=questionnaire,
    )
    tools.register(manager, names=names)
    return tools

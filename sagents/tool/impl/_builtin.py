"""``BuiltinTools`` / ``register_builtin_tools``: the built-in tools as ``(ToolSpec, handler)``
pairs for a :class:`~sagents.tool.ToolManager` (docs/builtin_tools.md).

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

from sagents.core._permissions import PermissionClass, ToolAnnotations
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
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
from sagents.tool.impl._history import compress_history_tool
from sagents.tool.impl._image import ImageSettings, ImageUnderstanding, VisionModel
from sagents.tool.impl._memory import MemoryStore, memory_tool
from sagents.tool.impl._questionnaire import QuestionnaireSettings, ask_questionnaire
from sagents.tool.impl._settings import BuiltinSettings
from sagents.tool.impl._shell import ShellTasks
from sagents.tool.impl._specs import SCHEMAS, describe_tool
from sagents.tool.impl._todo import TodoStore, todo_tool
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

DEFAULT_BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "execute_shell_command",
    "await_shell",
    "kill_shell",
    "file_read",
    "file_write",
    "file_update",
    "list_dir",
    "glob",
    "grep",
)
"""The shell and file tools: what ``names=None`` registers."""

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    *DEFAULT_BUILTIN_TOOL_NAMES,
    "web_fetch",
    "memory_store",
    "memory_search",
    "memory_delete",
    "todo_write",
    "todo_read",
    "image_understanding",
    "compress_history",
    "questionnaire",
)
"""Every built-in tool; those after the shell and file tools are offered only when named
(``names=[...]``)."""

_READ_ONLY = frozenset(
    {"file_read", "list_dir", "glob", "grep", "await_shell"}
    | {"web_fetch", "memory_search", "todo_read"}
    | {"image_understanding", "compress_history", "questionnaire"}
)
_NOT_IDEMPOTENT = frozenset({"compress_history", "questionnaire"})
_OPEN_WORLD = frozenset({"web_fetch"})


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
    name: str
    tools: BuiltinTools

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        try:
            return await self.tools.dispatch(self.name, arguments, call)
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

    async def _sandbox(self, context: SessionContext) -> Sandbox:
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
        if name not in BUILTIN_TOOL_NAMES:
            raise KeyError(f"no built-in tool {name!r}; known: {', '.join(BUILTIN_TOOL_NAMES)}")
        read_only = name in _READ_ONLY
        if read_only:
            permission: PermissionClass = "read_only"
        elif name in ("execute_shell_command", "kill_shell"):
            permission = self._shell_permission
        else:
            permission = "write"
        return ToolSpec(
            name=name,
            description=describe_tool(name),
            input_schema=SCHEMAS[name],
            annotations=ToolAnnotations(
                read_only_hint=read_only,
                destructive_hint=permission == "destructive",
                idempotent_hint=(name in _READ_ONLY and name not in _NOT_IDEMPOTENT)
                or name in ("file_write", "memory_delete"),
                open_world_hint=name in _OPEN_WORLD,
            ),
            permission=permission,
            source=ToolSource(kind="builtin"),
        )

    def tools(self, names: Iterable[str] | None = None) -> list[tuple[ToolSpec, ToolHandler]]:
        """``(ToolSpec, handler)`` pairs for ``names`` (the shell and file tools by default).

        Raises:
            KeyError: for a name that is not a built-in tool.
        """
        chosen = DEFAULT_BUILTIN_TOOL_NAMES if names is None else tuple(names)
        return [(self.spec(name), _Handler(name=name, tools=self)) for name in chosen]

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
        a = arguments
        if name == "await_shell":
            return await self.shell.await_task(
                call, task_id=a["task_id"], wait_seconds=a.get("wait_seconds")
            )
        if name == "kill_shell":
            return await self.shell.kill_task(call, task_id=a["task_id"])
        if name == "web_fetch":
            save_to = a.get("save_to")
            return await self.web.run(
                url=a["url"],
                format=a.get("format", "markdown"),
                max_chars=a.get("max_chars"),
                save_to=save_to,
                context=call.session_context,
                sandbox=None if save_to is None else await self._sandbox(call.session_context),
            )
        if name.startswith("memory_"):
            return await memory_tool(self.memory, name, a, call)
        if name.startswith("todo_"):
            return await todo_tool(self.todo, name, a, call)
        if name == "questionnaire":
            return await ask_questionnaire(a, call, self.questionnaire)
        if name == "compress_history":
            return await compress_history_tool(a, call)
        sandbox = await self._sandbox(call.session_context)
        if name == "execute_shell_command":
            return await self.shell.execute(
                sandbox,
                call,
                command=a["command"],
                wait_seconds=a.get("wait_seconds"),
                cwd=a.get("cwd"),
                timeout_seconds=a.get("timeout_seconds"),
            )
        if name == "image_understanding":
            return await self.images.run(
                sandbox, path=a["path"], question=a.get("question"), detail=a.get("detail", "auto")
            )
        if name == "file_read":
            return await self.files.read(
                sandbox,
                path=a["path"],
                start_line=a.get("start_line", 1),
                end_line=a.get("end_line"),
            )
        if name == "file_write":
            return await self.files.write(
                sandbox,
                path=a["path"],
                content=a["content"],
                create_dirs=a.get("create_dirs", True),
            )
        if name == "file_update":
            return await self.files.update(sandbox, path=a["path"], edits=list(a["edits"]))
        if name == "list_dir":
            return await self.files.list_dir(sandbox, path=a.get("path", "."))
        if name == "glob":
            return await self.files.glob(sandbox, pattern=a["pattern"])
        if name == "grep":
            return await self.files.grep(
                sandbox,
                pattern=a["pattern"],
                path=a.get("path", "."),
                include=a.get("include"),
                ignore_case=a.get("ignore_case", False),
            )
        raise KeyError(f"no built-in tool {name!r}")


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

"""Background calls of the gateway: calls that outlive their request
(docs/gateway.md, "Background calls").

A call still running after ``background_after_s`` is handed off: the client gets a handle (the
task id) at once, the call goes on in a task owned by :class:`BackgroundTasks`, and when it ends
its result is kept for the session and ``on_done`` is called (the gateway pushes a notification).
``script_status`` and ``script_cancel`` read and cancel tasks; a session sees only its own.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
from anyio.abc import TaskGroup

from sagents.core._lifespan import Lifespan
from sagents.core._result import ToolResult
from sagents.errors import TaskNotFoundError, ToolCancelledError

if TYPE_CHECKING:
    import mcp_types as mt

logger = logging.getLogger(__name__)

__all__ = [
    "CANCEL_TOOL",
    "STATUS_TOOL",
    "TASK_ID_BYTES",
    "TASK_URI_PREFIX",
    "BackgroundRegistry",
    "BackgroundStatus",
    "BackgroundTasks",
    "TaskInfo",
    "handed_off_result",
    "task_json",
    "task_tools",
]

BackgroundStatus = Literal["running", "ok", "error", "cancelled", "failed"]
"""A background call's status (:attr:`TaskInfo.status`); ``failed``: ended without a result, by
a restart of the process that ran it. Not :class:`sagents.sandbox.TaskStatus`, the state of a
sandbox's background process."""

STATUS_TOOL = "script_status"
CANCEL_TOOL = "script_cancel"
TASK_URI_PREFIX = "sagents://tasks/"
"""URI prefix of the MCP resource of each background task."""

TASK_ID_BYTES = 16
"""Random bytes of a task id (128 bits, URL-safe base64): a client that did not receive a handle
cannot guess it, which is what keeps a run of a client without identity to its starter."""

_NOTIFY_TIMEOUT_S = 5.0  # seconds a completion notification may take before it is given up


@dataclass(frozen=True, kw_only=True)
class TaskInfo:
    """A snapshot of one background task.

    Attributes:
        task_id: The handle the client received.
        session_id: The session that started it.
        tool: The tool's name.
        status: ``running``, ``ok``, ``error`` (the result is an error) or ``cancelled``.
        started_at: Unix time, seconds.
        finished_at: Unix time, seconds, or None while running.
        result: The call's result once finished.
    """

    task_id: str
    session_id: str
    tool: str
    status: BackgroundStatus
    started_at: float
    finished_at: float | None = None
    result: ToolResult | None = None


class BackgroundRegistry(Protocol):
    """What ``script_status`` / ``script_cancel`` need (the seam run_script's runner can fill)."""

    def list(self, session_id: str) -> list[TaskInfo]:
        """The session's tasks, oldest first (running and finished)."""
        ...

    def get(self, session_id: str, task_id: str) -> TaskInfo:
        """One task of the session. Raises ``TaskNotFoundError``."""
        ...

    async def cancel(self, session_id: str, task_id: str) -> TaskInfo:
        """Cancel a running task and wait for it to end. Raises ``TaskNotFoundError``."""
        ...


@dataclass(kw_only=True)
class _Task:
    info: TaskInfo
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    backgrounded: bool = False
    on_done: Callable[[TaskInfo], Awaitable[None]] | None = None


class BackgroundTasks(Lifespan):
    """Runs calls in tasks it owns; an async context manager (ending it cancels what runs).

    Use::

        async with BackgroundTasks() as tasks:
            handle = await tasks.start(session_id, "run_script", call)
            result = await tasks.wait(handle, hand_off_after=30.0)  # None: still running
    """

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}
        self._tg: TaskGroup | None = None

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                tg.cancel_scope.cancel()  # leaving cancels what still runs

    async def start(
        self, session_id: str, tool: str, call: Callable[[], Awaitable[ToolResult]]
    ) -> str:
        """Start ``call`` in a task; returns the task id.

        Raises:
            RuntimeError: when used outside ``async with``.
        """
        if self._tg is None:
            raise RuntimeError("BackgroundTasks is not running; use 'async with BackgroundTasks()'")
        task_id = secrets.token_urlsafe(TASK_ID_BYTES)  # the handle is the capability
        task = _Task(
            info=TaskInfo(
                task_id=task_id,
                session_id=session_id,
                tool=tool,
                status="running",
                started_at=time.time(),
            )
        )
        self._tasks[task_id] = task
        self._tg.start_soon(self._run, task, call)
        return task_id

    async def _run(self, task: _Task, call: Callable[[], Awaitable[ToolResult]]) -> None:
        result: ToolResult | None = None
        try:
            with task.scope:
                result = await call()
        except Exception as error:
            # The call's own boundary is its provider's run_tool (docs/architecture.md, "Where
            # errors become results"); a provider that raises anyway has a bug, which must end
            # this one call, not the task group every background call of the gateway runs in.
            logger.error("the background call of %r raised", task.info.tool, exc_info=error)
            result = ToolResult.from_error(
                "internal_error", f"the call of {task.info.tool!r} failed: {error}"
            )
        finally:
            self._finish(task, result)
            # In the finally: also when every task is cancelled (the gateway closing on
            # SIGTERM), so that the owner's record says "cancelled" like the run's own records.
            if task.backgrounded and task.on_done is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(_NOTIFY_TIMEOUT_S):
                    await task.on_done(task.info)

    @staticmethod
    def _finish(task: _Task, result: ToolResult | None) -> None:
        status: BackgroundStatus
        if result is None:
            status = "cancelled"
            result = ToolResult.from_exception(
                ToolCancelledError(f"the background call of {task.info.tool!r} was cancelled")
            )
        else:
            status = "error" if result.is_error else "ok"
        task.info = TaskInfo(
            task_id=task.info.task_id,
            session_id=task.info.session_id,
            tool=task.info.tool,
            status=status,
            started_at=task.info.started_at,
            finished_at=time.time(),
            result=result,
        )
        task.done.set()

    async def wait(
        self,
        task_id: str,
        *,
        hand_off_after: float | None,
        on_done: Callable[[TaskInfo], Awaitable[None]] | None = None,
        hand_off_now: anyio.Event | None = None,
    ) -> ToolResult | None:
        """Wait up to ``hand_off_after`` seconds for the task; hand it off if it is still running.

        ``hand_off_now``, once set, hands it off before that (the call is waiting for an answer
        that only a background call can be asked for).

        Returns:
            The result when the task ended in time (the task is then forgotten, it was never a
            background task); None when it goes on in the background, in which case
            ``on_done(info)`` is awaited when it ends.

        If the waiter is cancelled (the client cancelled the request), the task is cancelled too.
        """
        task = self._tasks[task_id]
        try:
            with anyio.move_on_after(hand_off_after) as timer:
                if hand_off_now is None:
                    await task.done.wait()
                else:
                    async with anyio.create_task_group() as tg:

                        async def early() -> None:
                            await hand_off_now.wait()
                            timer.cancel()

                        tg.start_soon(early)
                        await task.done.wait()
                        tg.cancel_scope.cancel()
        except BaseException:
            task.scope.cancel()
            with anyio.CancelScope(shield=True):
                await task.done.wait()
            self._tasks.pop(task_id, None)
            raise
        if task.done.is_set():
            self._tasks.pop(task_id, None)
            return task.info.result
        task.backgrounded = True
        task.on_done = on_done
        return None

    async def wait_session(self, session_id: str) -> None:
        """Wait until no task of ``session_id`` runs (those started meanwhile included)."""
        while True:
            running = [
                t for t in self._tasks.values()
                if t.info.session_id == session_id and not t.done.is_set()
            ]  # fmt: skip
            if not running:
                return
            for task in running:
                await task.done.wait()

    def running(self, session_id: str) -> bool:
        """Whether a task of ``session_id`` runs now."""
        return any(
            t.info.session_id == session_id and not t.done.is_set() for t in self._tasks.values()
        )

    def forget(self, task_id: str) -> None:
        """Drop a finished task and its result (kept elsewhere: the gateway's task store);
        a running or unknown one is left as it is."""
        task = self._tasks.get(task_id)
        if task is not None and task.done.is_set():
            del self._tasks[task_id]

    def list_all(self) -> list[TaskInfo]:
        """Every session's background tasks, oldest first (the operator's view)."""
        return [t.info for t in self._tasks.values() if t.backgrounded]

    def list(self, session_id: str) -> list[TaskInfo]:
        """The session's background tasks, oldest first."""
        return [
            t.info
            for t in self._tasks.values()
            if t.backgrounded and t.info.session_id == session_id
        ]

    def get(self, session_id: str, task_id: str) -> TaskInfo:
        """One background task of the session.

        Raises:
            TaskNotFoundError: no such task in this session (another session's tasks included).
        """
        task = self._tasks.get(task_id)
        if task is None or not task.backgrounded or task.info.session_id != session_id:
            raise TaskNotFoundError(
                f"no background task {task_id!r} in this session",
                hint="call script_status without an id to list this session's tasks",
                details={"task_id": task_id},
            )
        return task.info

    async def cancel(self, session_id: str, task_id: str) -> TaskInfo:
        """Cancel a running task and wait for it to end (a finished task is left as it is).

        Raises:
            TaskNotFoundError: no such task in this session.
        """
        self.get(session_id, task_id)
        task = self._tasks[task_id]
        task.scope.cancel()
        await task.done.wait()
        return task.info


def task_tools() -> list[mt.Tool]:
    """The MCP tools ``script_status(id?)`` and ``script_cancel(id)``."""
    import mcp_types as mt  # the MCP types only where MCP tools are built: not on an agent's run

    id_schema = {"type": "string", "description": "The task id a background call returned."}
    return [
        mt.Tool(
            name=STATUS_TOOL,
            description=(
                "Status of a background call (a long call handed off with a task id): running, "
                "ok, error or cancelled, with its result once finished. Without 'id', lists this "
                "session's background calls, finished ones included, a page at a time: pass "
                "the answer's 'next_cursor' as 'cursor' for the next page."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "id": id_schema,
                    "cursor": {
                        "type": "string",
                        "description": "The 'next_cursor' of the previous page of the listing.",
                    },
                },
            },
            annotations=mt.ToolAnnotations(read_only_hint=True),
        ),
        mt.Tool(
            name=CANCEL_TOOL,
            description="Cancel a running background call of this session.",
            input_schema={
                "type": "object",
                "properties": {"id": id_schema},
                "required": ["id"],
            },
            annotations=mt.ToolAnnotations(read_only_hint=False, destructive_hint=False),
        ),
    ]


def task_json(info: TaskInfo, *, full: bool = False) -> dict[str, Any]:
    """A task as JSON: id, tool, status, times; the result's text (first 200 characters unless
    ``full``) and ``is_error`` once finished."""
    data: dict[str, Any] = {
        "id": info.task_id,
        "tool": info.tool,
        "status": info.status,
        "started_at": info.started_at,
        "finished_at": info.finished_at,
    }
    if info.result is not None:
        data["result"] = info.result.to_tool_message() if full else info.result.text[:200]
        data["is_error"] = info.result.is_error
    return data


def handed_off_result(name: str, task_id: str) -> ToolResult:
    """The answer of a call handed off to the background: text plus ``{"task_id", "status"}``."""
    text = (
        f"The call of {name!r} is still running and continues in the background as task "
        f"{task_id!r}. Its result will be announced when it finishes; check it with "
        f"script_status(id={task_id!r}) or cancel it with script_cancel(id={task_id!r})."
    )
    return ToolResult(
        content=ToolResult.from_text(text).content,
        structured={"task_id": task_id, "status": "running"},
    )

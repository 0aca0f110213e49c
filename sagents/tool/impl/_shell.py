"""``execute_shell_command``, ``await_shell`` and ``kill_shell`` (docs/builtin_tools.md, "Shell").

A command runs as a background task of the session's sandbox (``/bin/sh -c``); the call then
waits up to ``wait_seconds`` for it, streaming the log to the live progress channel
(:func:`~sagents.progress.emit_tool_progress`) with byte-offset reads
(:class:`~sagents.tool.impl._output.OutputFollower`): no duplicate, no loss, UTF-8 intact, and
memory bounded by one read chunk whatever the output size. A task still running when the wait
ends keeps running; ``await_shell`` resumes following it where the last call stopped.

A task belongs to the session that started it: for any other session its id does not exist
(``task_not_found``), so a session can neither await nor kill another's task, nor learn that it
exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from sagents.core._result import TextContent, ToolResult
from sagents.errors import TaskNotFoundError
from sagents.progress import emit_tool_progress
from sagents.sandbox import Sandbox, TaskStatus
from sagents.tool._handler import ToolCall
from sagents.tool.impl._output import OutputFollower
from sagents.tool.impl._settings import BuiltinSettings

__all__ = ["ShellTasks", "read_output_tail"]


@dataclass(kw_only=True)
class _Task:
    session_id: str
    sandbox: Sandbox
    task_id: str
    command: str
    follower: OutputFollower
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    finished: bool = False


async def read_output_tail(sandbox: Sandbox, task_id: str, total: int, tail_bytes: int) -> str:
    """Return about the last ``tail_bytes`` bytes of a task's log as text.

    Args:
        sandbox: The task's sandbox.
        task_id: The task.
        total: The log's size in bytes (from its status).
        tail_bytes: How many bytes to return at most (a character that straddles the start is
            dropped rather than shown as replacement characters).

    Returns:
        The tail text.
    """
    start = max(0, total - tail_bytes)
    pieces: list[str] = []
    offset = start
    while offset < total:
        text, new_offset = await sandbox.read_background_output_range(
            task_id, offset, max(1, total - offset)
        )
        if new_offset == offset:
            break
        pieces.append(text)
        offset = new_offset
    text = "".join(pieces)
    if start > 0:
        # The window may start inside a character: its continuation bytes decode as U+FFFD.
        stripped = text.lstrip("\ufffd")
        if len(text) - len(stripped) <= 3:
            text = stripped
    return text


class ShellTasks:
    """The shell tasks of every session, and the three shell tools' implementations.

    Args:
        settings: Caps and defaults.
    """

    def __init__(self, settings: BuiltinSettings) -> None:
        self._settings = settings
        self._tasks: dict[str, _Task] = {}

    def _owned(self, task_id: str, session_id: str) -> _Task:
        task = self._tasks.get(task_id)
        if task is None or task.session_id != session_id:
            raise TaskNotFoundError(
                f"no shell task {task_id!r} in this session",
                hint="use the task_id that execute_shell_command returned in this session",
                details={"task_id": task_id},
            )
        return task

    def _wait_bound(self, requested: float | None, call: ToolCall) -> float:
        wait = self._settings.shell_default_wait_seconds if requested is None else requested
        wait = min(wait, self._settings.shell_max_wait_seconds)
        if call.timeout is not None:
            # Leave the call time to read the tail and answer before its own timeout.
            wait = min(wait, max(0.0, call.timeout * 0.9 - 1.0))
        return max(0.0, wait)

    async def _drain(self, task: _Task) -> None:
        while True:
            text = await task.follower.read_new()
            if not text:
                return
            await emit_tool_progress(text, stream="stdout")

    async def _follow(self, task: _Task, wait_seconds: float) -> TaskStatus:
        """Stream new output until the task ends or ``wait_seconds`` pass; return its status."""
        async with task.lock:
            deadline = anyio.current_time() + wait_seconds
            status = await task.sandbox.status(task.task_id)
            while True:
                await self._drain(task)
                if status.state != "running":
                    break
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    break
                status = await task.sandbox.wait(
                    task.task_id, timeout=min(self._settings.shell_poll_seconds, remaining)
                )
            await self._drain(task)
            final = await task.sandbox.status(task.task_id)
            task.finished = final.state != "running"
            return final

    def _prune(self, session_id: str) -> None:
        """Forget the session's oldest finished tasks beyond ``shell_max_tasks_per_session``."""
        mine = [t for t in self._tasks.values() if t.session_id == session_id]
        excess = len(mine) - self._settings.shell_max_tasks_per_session
        for old in mine:
            if excess <= 0:
                break
            if old.finished and not old.lock.locked():
                del self._tasks[old.task_id]
                excess -= 1

    async def _result(self, task: _Task, status: TaskStatus, waited: float) -> ToolResult:
        tail_bytes = self._settings.shell_tail_bytes
        tail = await read_output_tail(task.sandbox, task.task_id, status.output_bytes, tail_bytes)
        truncated = status.output_bytes > tail_bytes
        if status.state == "running":
            head = (
                f"[task {task.task_id} is still running after {waited:g} s; "
                f"{status.output_bytes:,} bytes of output so far. Call "
                f"await_shell(task_id={task.task_id!r}) to wait for it, or kill_shell to stop it]"
            )
        elif status.state == "killed":
            head = (
                f"[task {task.task_id} was killed ({status.killed_reason or 'killed'}); "
                f"exit code {status.exit_code}; {status.output_bytes:,} bytes of output]"
            )
        else:
            head = (
                f"[task {task.task_id} exited with code {status.exit_code}; "
                f"{status.output_bytes:,} bytes of output]"
            )
        parts = [head]
        if truncated:
            parts.append(
                f"[... {status.output_bytes - len(tail.encode()):,} earlier bytes not shown; "
                f"the full log is {status.log_path} ...]"
            )
        parts.append(tail)
        structured: dict[str, Any] = {
            "task_id": task.task_id,
            "command": task.command,
            "state": status.state,
            "exit_code": status.exit_code,
            "killed_reason": status.killed_reason,
            "output_bytes": status.output_bytes,
            "output_truncated": truncated,
            "log_path": status.log_path,
            "output": tail,
        }
        return ToolResult(content=(TextContent(text="\n".join(parts)),), structured=structured)

    async def execute(
        self,
        sandbox: Sandbox,
        call: ToolCall,
        *,
        command: str,
        wait_seconds: float | None = None,
        cwd: str | None = None,
        timeout_seconds: float | None = None,
    ) -> ToolResult:
        """Start ``command`` with ``/bin/sh -c`` in the background and wait for it.

        Args:
            sandbox: The session's sandbox.
            call: The call (its session owns the task).
            command: The shell command (non-empty).
            wait_seconds: How long to block (0 returns at once); the settings' default if None.
            cwd: Working directory (sandbox path), the workspace by default.
            timeout_seconds: Kill the task after this many seconds (the sandbox's default wall
                timeout if None).

        Returns:
            The task's status and output tail (see the module docstring).

        Raises:
            ValueError: for an empty command.
            PathNotAllowedError: for a ``cwd`` outside the workspace.
            SandboxError: when the sandbox cannot start it.
        """
        if not command.strip():
            raise ValueError("command must not be empty")
        if cwd is not None:
            # Confine the working directory to the workspace with the sandbox's own path rules
            # (PathNotAllowedError for ``..`` or a symlink out; FileNotFoundError if missing).
            where = await sandbox.stat(cwd)
            if where.kind != "dir":
                raise NotADirectoryError(20, "not a directory", cwd)
            cwd = where.path
        task_id = await sandbox.start(["/bin/sh", "-c", command], cwd=cwd, timeout=timeout_seconds)
        task = _Task(
            session_id=call.session_context.session_id,
            sandbox=sandbox,
            task_id=task_id,
            command=command,
            follower=OutputFollower(sandbox, task_id, chunk_bytes=self._settings.read_chunk_bytes),
        )
        self._tasks[task_id] = task
        self._prune(task.session_id)
        wait = self._wait_bound(wait_seconds, call)
        return await self._result(task, await self._follow(task, wait), wait)

    async def await_task(
        self, call: ToolCall, *, task_id: str, wait_seconds: float | None = None
    ) -> ToolResult:
        """Wait up to ``wait_seconds`` for a task of the caller's session, streaming its output.

        Raises:
            TaskNotFoundError: for an unknown task or another session's task.
        """
        task = self._owned(task_id, call.session_context.session_id)
        wait = self._wait_bound(wait_seconds, call)
        return await self._result(task, await self._follow(task, wait), wait)

    async def kill_task(self, call: ToolCall, *, task_id: str) -> ToolResult:
        """Kill a task of the caller's session (its whole process tree).

        Raises:
            TaskNotFoundError: for an unknown task or another session's task.
        """
        task = self._owned(task_id, call.session_context.session_id)
        await task.sandbox.kill(task_id)
        status = await self._follow(task, 0.0)
        return await self._result(task, status, 0.0)

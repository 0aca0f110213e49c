"""Bookkeeping shared by the providers: background tasks, capped draining, log range reads."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import anyio
import anyio.abc

from sagents.sandbox._process import LocalProcess
from sagents.sandbox._types import TaskState, TaskStatus
from sagents.sandbox._utf8 import decode_utf8_window

__all__ = ["BackgroundTask", "drain_capped", "read_log_range"]

_UTF8_SLACK = 3  # extra bytes read so that one character wider than the budget can complete


@dataclass(kw_only=True)
class BackgroundTask:
    """A provider's record of one background task (mutable; internal to providers).

    Attributes:
        task_id: The id returned by ``start``.
        argv: The command.
        log_path: Where stdout+stderr go.
        process: The running process (local providers), once started.
        done: Set when the task has ended and its log is complete.
        exit_code: For providers without a process object (memory).
    """

    task_id: str
    argv: tuple[str, ...]
    log_path: str
    process: LocalProcess | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    exit_code: int | None = None

    def status(self) -> TaskStatus:
        """The current :class:`TaskStatus`."""
        proc = self.process
        code = proc.returncode if proc is not None else self.exit_code
        reason = proc.killed_reason if proc is not None else None
        state: TaskState
        if not self.done.is_set():
            state = "running"
        elif reason is not None:
            state = "killed"
        else:
            state = "exited"
        try:
            size = os.stat(self.log_path).st_size if proc is not None else 0
        except FileNotFoundError:
            size = 0
        return TaskStatus(
            task_id=self.task_id,
            argv=self.argv,
            state=state,
            exit_code=code if self.done.is_set() else None,
            killed_reason=reason,
            output_bytes=size,
            log_path=self.log_path,
        )


async def drain_capped(
    stream: anyio.abc.ByteReceiveStream,
    cap: int,
    box: list[tuple[bytes, bool]],
    done: anyio.Event,
) -> None:
    """Read ``stream`` to its end, keeping the first ``cap`` bytes and discarding the rest.

    Appends ``(kept, truncated)`` to ``box`` and sets ``done`` when the stream ends (also when
    the drain is cancelled, with what it has).
    """
    kept = bytearray()
    truncated = False
    try:
        async for chunk in stream:
            room = cap - len(kept)
            if room > 0:
                kept += chunk[:room]
            if len(chunk) > max(room, 0):
                truncated = True
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        truncated = True
    finally:
        box.append((bytes(kept), truncated))
        done.set()


def read_log_range(path: str, offset: int, max_bytes: int, final: bool) -> tuple[str, int]:
    """Read a log file from ``offset`` without splitting UTF-8 (blocking; run in a thread).

    Args:
        path: The log file.
        offset: Byte offset to start from (>= 0); past the end gives ``("", offset)``.
        max_bytes: Budget in bytes (>= 1); one character wider than it is still returned whole.
        final: True when the writer has finished (an incomplete tail is then decoded).

    Returns:
        ``(text, new_offset)``.

    Raises:
        ValueError: for a negative offset or ``max_bytes`` < 1.
    """
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset!r}")
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be >= 1, got {max_bytes!r}")
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.pread(fd, max_bytes + _UTF8_SLACK, offset)
        at_end = final and len(data) <= max_bytes
    finally:
        os.close(fd)
    text, used = decode_utf8_window(data, max_bytes, final=at_end)
    return text, offset + used

"""The write stream of a stdio server's stdin: each request written by the task that sends it.

A hand-off to a writer task per request costs a memory-stream send, a checkpoint and a wake-up
of that task for every call. :class:`PipeWriter` instead writes each message (one JSON-RPC line,
MCP spec 2025-11-25, "Transports", "stdio") from the sender's own task with one non-blocking
``os.write`` on the pipe, when nothing else is waiting to be written. What a full pipe does not
take is left to :meth:`PipeWriter.run`, the writer task, which waits for the pipe to drain and
writes it out; until it is out, further sends wait. So a message is never torn (a sender
cancelled while it waits has written nothing; once its write began, the rest goes out whatever
happens to the sender), messages never interleave, and at most one message's remainder is held
in memory (back-pressure on the senders instead).

Like the memory object stream it stands for (the SDK's ``ClientSession`` write stream): sending
after :meth:`PipeWriter.aclose` raises ``anyio.ClosedResourceError``; once the server's end is
gone (``EPIPE``) every send raises ``anyio.BrokenResourceError`` and ``on_broken`` is called
once, so that pending requests fail at once instead of waiting for an answer.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from types import TracebackType
from typing import Self

import anyio
from mcp.shared.message import SessionMessage

__all__ = ["PipeWriter"]


class PipeWriter:
    """Writes messages, one line each, to a non-blocking pipe descriptor (see the module doc).

    Args:
        fd: The write end of the server's stdin pipe, already non-blocking; closed by
            :meth:`close_fd`.
        encoding: Text encoding of the lines (``StdioServerParameters.encoding``).
        on_broken: Called once when a write finds the server's end closed.
    """

    def __init__(self, fd: int, *, encoding: str, on_broken: Callable[[], None]) -> None:
        self._fd = fd
        self._encoding = encoding
        self._on_broken = on_broken
        self._pending = b""  # written in part: the rest is the writer task's
        self._wake = anyio.Event()  # the writer task has something to do
        self._drained = anyio.Event()  # nothing is pending any more
        self._drained.set()
        self._closed = False
        self._broken = False
        self._fd_open = True

    async def send(self, item: SessionMessage, /) -> None:
        """Write ``item`` (or hand the rest to the writer task), once earlier ones are out.

        Raises:
            anyio.ClosedResourceError: the stream was closed.
            anyio.BrokenResourceError: the server's end of the pipe is closed.
        """
        while self._pending:
            await self._drained.wait()
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        data = (item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode(
            self._encoding
        )
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError:  # EPIPE: the server closed its stdin or died
            self._break()
            raise anyio.BrokenResourceError from None
        if written < len(data):
            self._pending = data[written:]
            self._drained = anyio.Event()
            self._wake.set()

    async def run(self) -> None:
        """The writer task: write what the senders left over, until closed (or broken).

        However it ends (cancelled with its task group too), nothing writes after it: a
        remainder it did not write is dropped, the senders waiting behind it and every later
        send fail (``anyio.ClosedResourceError``, or ``anyio.BrokenResourceError`` once broken)
        instead of waiting for a drain.
        """
        try:
            await self._run()
        finally:
            if not self._broken:
                self._closed = True
            self._pending = b""
            self._drained.set()

    async def _run(self) -> None:
        while not self._closed and not self._broken:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not self._fd_open:
                break  # closed before this task ran: the number may be someone else's now
            if not self._pending:
                continue
            view = memoryview(self._pending)
            try:
                while view and self._fd_open:  # closed while this task waited: stop
                    try:
                        view = view[os.write(self._fd, view) :]
                    except BlockingIOError:
                        await anyio.wait_writable(self._fd)
            except (OSError, anyio.ClosedResourceError):  # EPIPE, or the descriptor closed
                self._break()
            finally:
                view.release()
            self._pending = b""
            self._drained.set()

    def _break(self) -> None:
        if not self._broken:
            self._broken = True
            self._on_broken()

    async def aclose(self) -> None:
        """Accept no more messages (what the writer task holds is still written)."""
        self._closed = True
        if not self._pending:
            self._wake.set()  # nothing left to write: the writer task ends

    def close_fd(self) -> None:
        """Close the pipe (the server's stdin then ends); a pending remainder is dropped."""
        if self._fd_open:
            self._fd_open = False
            self._closed = True  # nothing is written to the number any more
            anyio.notify_closing(self._fd)  # a writer waiting on it gets ClosedResourceError
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._wake.set()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

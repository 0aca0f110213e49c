"""Line transports for the run_script protocol: the host's end of fds 3/4, and an in-memory pair.

A :class:`ScriptTransport` yields request lines and sends reply lines. Lines longer than the cap
are never buffered whole: the reader drops their bytes up to the next newline and yields an
:class:`OverlongLine` in their place, so a script cannot make the host hold more than the cap.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.script._protocol import MAX_REQUEST_BYTES

__all__ = [
    "READ_CHUNK_BYTES",
    "LineSplitter",
    "MemoryTransport",
    "OverlongLine",
    "PipeTransport",
    "ScriptTransport",
    "memory_transport_pair",
]

READ_CHUNK_BYTES = 64 * 1024  # one read from the request pipe


@dataclass(frozen=True, kw_only=True)
class OverlongLine:
    """Stands for a line that exceeded the cap; its bytes were dropped.

    Attributes:
        size: Bytes seen before the line ended (or the stream did).
    """

    size: int


class ScriptTransport(Protocol):
    """The host's end of a script's request/reply channel."""

    async def receive_line(self) -> bytes | OverlongLine | None:
        """The next request line (without its newline), an :class:`OverlongLine`, or None at
        end of stream (the script closed fd 3 or exited)."""
        ...

    async def send_line(self, data: bytes) -> None:
        """Send reply lines: one, or several written at once (``data`` ends with a newline).

        Raises:
            anyio.BrokenResourceError: when the script no longer reads (fd 4 closed, exited).
        """
        ...


@dataclass(kw_only=True)
class LineSplitter:
    """Splits a byte stream into capped lines (the incremental part of every transport)."""

    max_bytes: int = MAX_REQUEST_BYTES
    _buffer: bytearray = field(default_factory=bytearray)
    _dropping: int = 0  # > 0 while skipping the rest of an overlong line
    _ready: deque[bytes | OverlongLine] = field(default_factory=deque)

    def feed(self, chunk: bytes) -> None:
        """Add bytes; complete lines become available through :meth:`pop`."""
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._dropping:
                self._dropping += len(piece)
            elif len(self._buffer) + len(piece) > self.max_bytes:
                self._dropping = len(self._buffer) + len(piece)
                self._buffer.clear()
            else:
                self._buffer += piece
            if end < 0:
                return
            if self._dropping:
                self._ready.append(OverlongLine(size=self._dropping))
                self._dropping = 0
            else:
                self._ready.append(bytes(self._buffer))
                self._buffer.clear()
            start = end + 1

    def finish(self) -> None:
        """End of stream: a final unterminated line becomes available too."""
        if self._dropping:
            self._ready.append(OverlongLine(size=self._dropping))
        elif self._buffer:
            self._ready.append(bytes(self._buffer))
        self._dropping = 0
        self._buffer.clear()

    def pop(self) -> bytes | OverlongLine | None:
        """The oldest complete line, or None when there is none."""
        return self._ready.popleft() if self._ready else None


class PipeTransport:
    """Non-blocking pipe descriptors of the host: the request pipe's read end and the reply
    pipe's write end. Takes ownership of both (see :meth:`aclose`)."""

    def __init__(self, request_fd: int, reply_fd: int, *, max_bytes: int = MAX_REQUEST_BYTES):
        self._request_fd: int | None = request_fd
        self._reply_fd: int | None = reply_fd
        os.set_blocking(request_fd, False)
        os.set_blocking(reply_fd, False)
        self._lines = LineSplitter(max_bytes=max_bytes)
        self._eof = False

    async def receive_line(self) -> bytes | OverlongLine | None:
        """See :meth:`ScriptTransport.receive_line`."""
        while True:
            line = self._lines.pop()
            if line is not None:
                return line
            if self._eof or self._request_fd is None:
                return None
            try:
                chunk = os.read(self._request_fd, READ_CHUNK_BYTES)
            except BlockingIOError:
                await anyio.wait_readable(self._request_fd)
                continue
            except OSError:
                chunk = b""
            if chunk:
                self._lines.feed(chunk)
            else:
                self._eof = True
                self._lines.finish()

    async def send_line(self, data: bytes) -> None:
        """See :meth:`ScriptTransport.send_line`."""
        view = memoryview(data)
        while view:
            if self._reply_fd is None:
                raise anyio.BrokenResourceError
            try:
                view = view[os.write(self._reply_fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._reply_fd)
            except OSError as error:  # EPIPE: the script closed fd 4 or exited
                raise anyio.BrokenResourceError from error

    def close(self) -> None:
        """Close both descriptors (idempotent)."""
        for name in ("_request_fd", "_reply_fd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                anyio.notify_closing(fd)
                os.close(fd)


class MemoryTransport:
    """An in-memory transport for tests: lines in, lines out, through memory object streams."""

    def __init__(
        self,
        incoming: MemoryObjectReceiveStream[bytes],
        outgoing: MemoryObjectSendStream[bytes],
        *,
        max_bytes: int = MAX_REQUEST_BYTES,
    ) -> None:
        self._incoming = incoming
        self._outgoing = outgoing
        self._lines = LineSplitter(max_bytes=max_bytes)
        self._eof = False

    async def receive_line(self) -> bytes | OverlongLine | None:
        """See :meth:`ScriptTransport.receive_line`."""
        while True:
            line = self._lines.pop()
            if line is not None or self._eof:
                return line
            try:
                self._lines.feed(await self._incoming.receive())
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                self._eof = True
                self._lines.finish()

    async def send_line(self, data: bytes) -> None:
        """See :meth:`ScriptTransport.send_line`."""
        try:
            await self._outgoing.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as error:
            raise anyio.BrokenResourceError from error


def memory_transport_pair(
    *, max_bytes: int = MAX_REQUEST_BYTES
) -> tuple[MemoryTransport, MemoryObjectSendStream[bytes], MemoryObjectReceiveStream[bytes]]:
    """A host transport plus the guest's ends: ``(transport, send raw bytes, receive replies)``.

    Close the returned send stream to signal end of stream to the host.
    """
    to_host, from_guest = anyio.create_memory_object_stream[bytes](1000)
    to_guest, from_host = anyio.create_memory_object_stream[bytes](1000)
    return MemoryTransport(from_guest, to_guest, max_bytes=max_bytes), to_host, from_host

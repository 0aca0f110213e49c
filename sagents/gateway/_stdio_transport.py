"""The gateway's stdio transport: JSON-RPC lines on the process's stdin and stdout, without a
worker thread per message (docs/gateway.md, "stdio").

The ``mcp`` SDK stays the protocol implementation: :func:`stdio_streams` only hands its
``Server.run`` the two memory object streams the SDK's own ``mcp.server.stdio.stdio_server``
would, with the same framing (MCP spec 2025-11-25, "Transports", "stdio": one JSON-RPC message
per line, UTF-8) and the same claim of the standard descriptors (while serving, fd 0 reads the
null device and fd 1 writes to stderr, so that stray output of a handler never reaches the
wire; both are restored on exit). What differs is how the bytes move:

- the server's own receive reads what is there (up to :data:`READ_CHUNK` bytes, any number
  of lines) in the event loop, waiting for stdin to be readable only when nothing is
  (:class:`WireReader`: no reader task, no hand-off between tasks per message, instead of one
  worker-thread hand-off per line); a line over
  :data:`~sagents.gateway._stdin_lines.MAX_LINE_BYTES` is thrown away as it arrives and
  :data:`~sagents.gateway._stdin_lines.OVERLONG_LINE` takes its place; each line is decoded as
  UTF-8 with invalid bytes replaced and validated as the SDK does (an invalid line reaches the
  server as the SDK's exception, which it answers as the SDK does);
- each reply is written by the task that sends it, with one non-blocking ``write`` on a pipe
  or socket (:class:`WireWriter`: no hand-off to a writer task per reply); what a full pipe
  does not take goes to the writer task, which resumes it once the pipe drains (so a huge reply
  arrives whole and replies never interleave), and until it is out the server's sends wait
  (back-pressure). On a terminal, a regular file or a stdout shared with stderr (``2>&1``),
  which must not be made non-blocking under other writers, each reply is written by the writer
  task in a worker thread instead (left behind, on exit, if it is still blocked after the flush
  deadline).

When the client closes its end of stdout (``EPIPE``), the transport stops reading, so that
``Server.run`` ends as on stdin's end of file; replies still being produced are dropped.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.shared.message import SessionMessage

from sagents.gateway._stdin_lines import MAX_LINE_BYTES, OVERLONG_LINE

if sys.platform != "win32":
    import fcntl

__all__ = ["READ_CHUNK", "ReadStream", "WireReader", "WireWriter", "WriteStream", "stdio_streams"]

logger = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024
"""Most bytes read from stdin at once (one read may carry many lines)."""
_SHUTDOWN_FLUSH_S = 5.0
"""Seconds given, on exit, to write the replies already handed to the transport."""


@dataclass(kw_only=True)
class _Wire:
    """The private descriptors the transport reads and writes, and how to give them back."""

    read_fd: int
    write_fd: int
    pollable_read: bool
    nonblocking_read: bool
    nonblocking_write: bool
    restore: list[tuple[int, int]]  # (standard fd, private duplicate) to dup2 back on exit
    block_on_exit: list[int]  # the private descriptors made non-blocking here


@asynccontextmanager
async def stdio_streams(
    *,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> AsyncIterator[tuple[WireReader, WireWriter]]:
    """The read and write streams of ``Server.run`` over this process's stdin and stdout.

    Args:
        stdin_fd: The descriptor the client writes to (0: stdin, then diverted to the null
            device while serving).
        stdout_fd: The descriptor the client reads (1: stdout, then diverted to stderr while
            serving).
        max_line_bytes: The longest line read (bytes, newline excluded); at least 1.

    Yields:
        ``(read_stream, write_stream)``: messages (or the SDK's validation error of a bad line)
        from the client; messages to it. The serving loop closes the write stream when it ends.

    Raises:
        ValueError: ``max_line_bytes`` below 1.
        OSError: stdin or stdout is not an open descriptor.
    """
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be at least 1, not {max_line_bytes}")
    wire = _claim(stdin_fd, stdout_fd)
    reader = WireReader(wire, max_line_bytes)
    try:
        async with anyio.create_task_group() as tg:
            writer = WireWriter(wire, reader)
            tg.start_soon(writer.run)
            try:
                yield reader, writer
            finally:
                writer.close()  # the serving loop closes it; a caller may not have
                tg.cancel_scope.deadline = anyio.current_time() + _SHUTDOWN_FLUSH_S
    finally:
        reader.close()
        _release(wire)


def _claim(stdin_fd: int, stdout_fd: int) -> _Wire:
    """Take private duplicates of the wire's descriptors and divert the standard ones."""
    read_mode, write_mode = os.fstat(stdin_fd).st_mode, os.fstat(stdout_fd).st_mode
    pipe_in = stat.S_ISFIFO(read_mode) or stat.S_ISSOCK(read_mode)
    pollable_read = pipe_in or os.isatty(stdin_fd)
    # Non-blocking applies to the open file, which other processes (a terminal's) or our own
    # stderr (2>&1) may share: only on a pipe or socket of its own.
    own_pipe = sys.platform != "win32" and not _same_file(stdout_fd, 2)
    nonblocking_read = pipe_in and own_pipe
    nonblocking_write = (stat.S_ISFIFO(write_mode) or stat.S_ISSOCK(write_mode)) and own_pipe
    restore: list[tuple[int, int]] = []
    read_fd, write_fd = stdin_fd, stdout_fd
    if sys.platform != "win32":
        read_fd = fcntl.fcntl(stdin_fd, fcntl.F_DUPFD_CLOEXEC, 3)
        write_fd = fcntl.fcntl(stdout_fd, fcntl.F_DUPFD_CLOEXEC, 3)
        for standard, private, diversion in (
            (stdin_fd, read_fd, _null_reader),
            (stdout_fd, write_fd, _stderr_writer),
        ):
            if standard not in (0, 1):
                continue  # a caller's descriptor: not ours to divert
            try:
                replacement = diversion()
                try:
                    os.dup2(replacement, standard)
                finally:
                    os.close(replacement)
            except OSError as error:
                logger.info("could not divert fd %d away from the wire: %s", standard, error)
                continue
            restore.append((standard, private))
    block_on_exit = []
    for fd, wanted in ((read_fd, nonblocking_read), (write_fd, nonblocking_write)):
        if wanted and os.get_blocking(fd):
            os.set_blocking(fd, False)
            block_on_exit.append(fd)
    return _Wire(
        read_fd=read_fd,
        write_fd=write_fd,
        pollable_read=pollable_read,
        nonblocking_read=nonblocking_read,
        nonblocking_write=nonblocking_write,
        restore=restore,
        block_on_exit=block_on_exit,
    )


def _release(wire: _Wire) -> None:
    """Point the standard descriptors back at the wire and close the private duplicates."""
    for fd in wire.block_on_exit:
        with suppress(OSError):
            os.set_blocking(fd, True)
    for standard, private in wire.restore:
        with suppress(OSError):
            os.dup2(private, standard)
    for fd in {wire.read_fd, wire.write_fd}:
        if fd > 2:
            with suppress(OSError):
                os.close(fd)


def _same_file(a: int, b: int) -> bool:
    try:
        first, second = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _null_reader() -> int:
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


def _stderr_writer() -> int:
    try:
        return fcntl.fcntl(2, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


# Reading ------------------------------------------------------------------------------------


class WireReader:
    """What the client sent, each line's message (``Server.run``'s read stream).

    No reader task: :meth:`receive` reads the wire itself, in the receiving task, when no line
    it read before is left (one read may carry many lines), so a message reaches the server
    without a hand-off between tasks. Like a memory object stream's receiving end: iterating
    ends (``anyio.EndOfStream``) at the wire's end of file, after :meth:`stop` (the client
    closed its end of stdout) and after :meth:`close`.
    """

    def __init__(self, wire: _Wire, max_line_bytes: int) -> None:
        self._wire = wire
        self._max_line_bytes = max_line_bytes
        self._lines: deque[str] = deque()  # read, not yet received
        self._pending = bytearray()  # the unfinished line
        self._dropping = False  # inside a line over the cap: its bytes are not kept
        self._ended = False  # end of file (or a failed read): nothing more will be read
        self._stopped = False
        self._waiting: anyio.CancelScope | None = None  # a receive waiting for stdin

    async def receive(self) -> SessionMessage | Exception:
        """The next line's message, or the SDK's validation error of a bad line.

        Raises:
            anyio.EndOfStream: stdin ended, or the stream was stopped or closed.
        """
        while not self._lines:
            if self._ended or self._stopped:
                raise anyio.EndOfStream
            try:
                chunk = await self._read()
            except OSError as error:
                logger.info("stdin failed: %s", error)
                chunk = b""
            if self._stopped:
                raise anyio.EndOfStream
            if not chunk:
                self._end()
            elif not self._split(chunk):
                await anyio.lowlevel.checkpoint()  # a client flooding one line: let others run
        if self._stopped:
            raise anyio.EndOfStream
        return _parse(self._lines.popleft())

    async def _read(self) -> bytes:
        """What stdin has (up to :data:`READ_CHUNK` bytes), waiting only when nothing is there;
        empty at end of file and once stopped."""
        wire = self._wire
        if not wire.pollable_read:  # a regular file or device: no readiness to wait for
            return await anyio.to_thread.run_sync(os.read, wire.read_fd, READ_CHUNK)
        if wire.nonblocking_read:
            try:
                return os.read(wire.read_fd, READ_CHUNK)
            except BlockingIOError:  # nothing there yet
                pass
        with anyio.CancelScope() as waiting:  # stop() ends the wait
            self._waiting = waiting
            try:
                while True:
                    await anyio.wait_readable(wire.read_fd)
                    try:
                        return os.read(wire.read_fd, READ_CHUNK)
                    except BlockingIOError:  # another reader was first
                        continue
            finally:
                self._waiting = None
        return b""

    def _split(self, chunk: bytes) -> bool:
        """Queue the lines ``chunk`` ends; keep the rest. Whether a line ended in it."""
        start = 0
        ended = False
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._dropping and len(self._pending) + len(piece) > self._max_line_bytes:
                self._pending.clear()
                self._dropping = True
            if end < 0:
                if not self._dropping:
                    self._pending += piece
                return ended
            ended = True
            if self._dropping:
                self._lines.append(OVERLONG_LINE)
                self._dropping = False
            elif self._pending:
                self._pending += piece
                self._lines.append(self._pending.decode("utf-8", errors="replace") + "\n")
                self._pending.clear()
            else:
                self._lines.append(piece.decode("utf-8", errors="replace") + "\n")
            start = end + 1

    def _end(self) -> None:
        self._ended = True
        if self._dropping:
            self._lines.append(OVERLONG_LINE)
        elif self._pending:  # the last line, without its newline
            self._lines.append(self._pending.decode("utf-8", errors="replace"))
            self._pending.clear()

    def stop(self) -> None:
        """Read no more: a waiting :meth:`receive` and every later one end the stream."""
        self._stopped = True
        if self._waiting is not None:
            self._waiting.cancel()

    def close(self) -> None:
        """Same as :meth:`stop`."""
        self.stop()

    async def aclose(self) -> None:
        """Same as :meth:`stop`."""
        self.stop()

    def __aiter__(self) -> WireReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WireReader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()


ReadStream = WireReader
"""What the client sent: each line's message, or the validation error of a bad line."""


def _parse(line: str) -> SessionMessage | Exception:
    """The line's message, or the exception the SDK's stdio transport hands the server (the
    line is validated as the SDK reads it: decoded, newline included)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:  # pydantic's ValidationError: the server answers it as the SDK's
        return error


# Writing ------------------------------------------------------------------------------------


def _encode(message: SessionMessage) -> bytes:
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()


class WireWriter:
    """What the server sends to the client, each message a line (``Server.run``'s write stream).

    A message goes out from the sender's own task, in one non-blocking ``write``, when nothing
    is waiting to be written: no hand-off to a writer task and back per reply. What a write
    leaves over (a full pipe), and every message on a descriptor that must stay blocking (a
    terminal, a regular file, a stdout shared with stderr), is left to :meth:`run`, the writer
    task, which writes it whole; until it is out, further sends wait (back-pressure, and no two
    messages interleave). Like a memory object stream: :meth:`send_nowait` raises
    ``anyio.WouldBlock`` while they would wait, and sending after :meth:`close` raises
    ``anyio.ClosedResourceError``. After the client closed its end (``EPIPE``), messages are
    accepted and dropped, and reading stops, so that the serving loop ends as on end of file.
    """

    def __init__(self, wire: _Wire, reader: WireReader) -> None:
        self._wire = wire
        self._reader = reader
        self._pending = bytearray()  # accepted, not yet written: the writer task's
        self._wake = anyio.Event()  # the writer task has something to do
        self._drained = anyio.Event()  # nothing is pending any more
        self._drained.set()
        self._closed = False
        self._broken = False

    async def send(self, message: SessionMessage) -> None:
        """Write ``message`` (or hand it to the writer task), once earlier ones are out.

        Raises:
            anyio.ClosedResourceError: the stream was closed.
        """
        while self._pending:
            await self._drained.wait()
        self.send_nowait(message)

    def send_nowait(self, message: SessionMessage) -> None:
        """Write ``message`` now, or hand what the pipe does not take to the writer task.

        Raises:
            anyio.WouldBlock: an earlier message is still being written.
            anyio.ClosedResourceError: the stream was closed.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        if self._pending:
            raise anyio.WouldBlock
        if self._broken:
            return  # the client is gone: drop what is still produced
        data = _encode(message) + b"\n"
        if self._wire.nonblocking_write:
            try:
                written = os.write(self._wire.write_fd, data)
            except BlockingIOError:
                written = 0
            except (BrokenPipeError, ConnectionResetError) as error:
                self._break(error)
                return
            if written == len(data):
                return
            data = data[written:]
        self._pending += data
        self._drained = anyio.Event()
        self._wake.set()

    def close(self) -> None:
        """Accept no more messages; the writer task ends once the pending ones are written."""
        self._closed = True
        self._wake.set()

    async def aclose(self) -> None:
        """Same as :meth:`close`."""
        self.close()

    async def __aenter__(self) -> WireWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    async def run(self) -> None:
        """The writer task: write what the senders left over, until closed and written."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._pending:
                try:
                    await _write_all(self._wire, bytes(self._pending))
                except (BrokenPipeError, ConnectionResetError) as error:
                    self._break(error)
                self._pending.clear()
                self._drained.set()
            if self._closed:
                return

    def _break(self, error: OSError) -> None:
        logger.info("the client closed stdout (%s); ending the session", error)
        self._broken = True
        self._reader.stop()  # the serving loop then ends as on stdin's end of file


WriteStream = WireWriter
"""What goes to the client, one message per line."""


async def _write_all(wire: _Wire, data: bytes) -> None:
    if not wire.nonblocking_write:
        # Abandoned on cancel (the shutdown's flush deadline): a terminal or a pipe shared with
        # stderr that nobody reads must not hold the exit. The thread writes through its own
        # duplicate, so closing the wire's descriptor cannot point its writes elsewhere.
        fd = os.dup(wire.write_fd)
        await anyio.to_thread.run_sync(_write_blocking, fd, data, abandon_on_cancel=True)
        return
    view = memoryview(data)
    while view:
        try:
            written = os.write(wire.write_fd, view)
        except BlockingIOError:
            await anyio.wait_writable(wire.write_fd)
            continue
        view = view[written:]


def _write_blocking(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, then close ``fd`` (a duplicate made for this write)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)

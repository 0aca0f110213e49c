"""stdio transport for upstream servers, on the template of the SDK's ``mcp.client.stdio``.

Why not ``stdio_client`` itself: it does not expose the process, so nothing could end a server's
process group when our interpreter exits, and after a clean exit of the wrapper (``npx``,
``uvx``) it leaves the wrapper's children running. This transport:

- starts the server in its own session (process group), its stderr copied to a log file, at
  most :data:`LOG_BYTES_PER_RUN` per run (:class:`CappedLog`);
- frames stdout lines with the SDK's ``jsonrpc_message_adapter`` (never hand-written JSON-RPC),
  decoding with ``errors="replace"`` so one invalid UTF-8 byte cannot kill the transport, and
  skipping lines that are not JSON-RPC (logged to the server's log);
- on close: closes stdin, waits a grace period, then SIGTERM → SIGKILL to the whole process group
  whether or not the leader already exited, every wait bounded and shielded (MCP spec
  2025-11-25, "Lifecycle / Shutdown");
- keeps the process groups of live servers in a process-wide set that an ``atexit`` hook kills,
  so that no server outlives the interpreter even when nobody closed it;
- and tells them to a watchdog process (:mod:`sagents.mcp._watchdog`) that ends them when our
  process dies without running any hook (``SIGKILL``, the OOM killer).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Protocol

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.text import TextReceiveStream
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from sagents.core._secrets import Redactor
from sagents.mcp._pipe_writer import PipeWriter
from sagents.mcp._streams import WriteStream
from sagents.mcp._watchdog import group_alive

__all__ = [
    "LOG_BYTES_PER_RUN",
    "CappedLog",
    "RunningProcess",
    "StdioProcess",
    "Transport",
    "copy_stderr",
    "forget_group",
    "frame_stdio",
    "open_stdio_transport",
    "watch_group",
    "watchdog_pid",
]

logger = logging.getLogger(__name__)

STDIN_CLOSE_GRACE = 1.0  # seconds a server gets to exit after its stdin closes
TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL to the process group
_REAP_TIMEOUT = 2.0  # seconds for the event loop to observe the leader's death after SIGKILL
_POLL = 0.01  # seconds between returncode checks
REDACTED_LINE_CHARS = 65536  # a longer line without a newline is redacted and written in pieces
STDERR_TAIL_LINES = 10  # lines of a failed server's stderr quoted in its error
STDERR_TAIL_BYTES = 4096  # at most this much of the end of the log is read for them
MAX_LINE_CHARS = 64 * 1024 * 1024
"""Longest stdout line kept (characters): a longer one is dropped, with a note in the log,
rather than held in the gateway's memory while the server never ends it."""
LOG_BYTES_PER_RUN = 64 * 1024 * 1024
"""Most of a stdio server's stderr (and notes on its stdout) kept in its log per run: a flood
must not fill the gateway's disk (the rest is read and dropped)."""
STDERR_DRAIN_SECONDS = 2.0  # after the tree ended, how long its stderr may take to reach EOF
WRITE_BATCH_MESSAGES = 64  # requests ready together are written to a server's stdin at once

# The process-wide mutable state of this module, on purpose: process groups of servers that
# are running now, killed by the atexit hook below if the interpreter exits before they close,
# and the pipe to the watchdog that kills them if the interpreter dies without exiting.
_LIVE_GROUPS: set[int] = set()
_WATCHDOG_SCRIPT = Path(__file__).with_name("_watchdog.py")


class _Watchdog:
    """The pipe to this process's watchdog (started on first use, restarted if it died)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def _send(self, line: str) -> None:
        with self._lock:
            for _ in range(2):
                if self._process is None or self._process.poll() is not None:
                    self._process = self._start()
                    if self._process is None:
                        return
                    line = "".join(f"+ {pgid}\n" for pgid in _LIVE_GROUPS) + line
                stdin = self._process.stdin
                assert stdin is not None
                try:
                    stdin.write(line.encode())
                    stdin.flush()
                    return
                except OSError:  # it died: start another one and tell it everything
                    self._process = None

    @staticmethod
    def _start() -> subprocess.Popen[bytes] | None:
        try:
            return subprocess.Popen(
                [sys.executable, "-I", "-S", str(_WATCHDOG_SCRIPT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not in our group: a signal to it does not reach it
            )
        except OSError as error:
            logger.warning("no watchdog for stdio servers (%s): a SIGKILL may leak them", error)
            return None

    @property
    def pid(self) -> int | None:
        """The watchdog's pid while it runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def watch(self, pgid: int) -> None:
        """Have the watchdog end group ``pgid`` if this process dies."""
        self._send(f"+ {pgid}\n")

    def forget(self, pgid: int) -> None:
        """The group ended: the watchdog must not signal that number again."""
        self._send(f"- {pgid}\n")

    def close(self, ended: set[int]) -> None:
        """At a normal exit, once the groups ``ended`` were killed: tell the watchdog they are
        gone, hang up (it exits at EOF with nothing left to end) and reap it, so that no child
        outlives this process and Python warns of no subprocess still running."""
        with self._lock:
            process, self._process = self._process, None
        if process is None or process.stdin is None:
            return
        with contextlib.suppress(OSError):  # it died already: nothing to tell
            process.stdin.write("".join(f"- {pgid}\n" for pgid in ended).encode())
        with contextlib.suppress(OSError):
            process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):  # the EOF ends it all the same
            process.wait(timeout=TERM_GRACE)


_WATCHDOG = _Watchdog()


def watchdog_pid() -> int | None:
    """The pid of this process's stdio-server watchdog (:mod:`sagents.mcp._watchdog`), if any."""
    return _WATCHDOG.pid


@atexit.register
def _kill_live_groups() -> None:  # pragma: no cover - runs at interpreter exit
    ended = set(_LIVE_GROUPS)
    for pgid in ended:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    _WATCHDOG.close(ended)


class RunningProcess(Protocol):
    """The process behind a stdio transport: a host process group, or a sandboxed tree."""

    @property
    def pid(self) -> int:
        """The leader's pid (for a sandboxed server, bubblewrap's), also its process group."""
        ...

    @property
    def returncode(self) -> int | None:
        """The leader's exit status once reaped, else None."""
        ...

    def kill_tree(self) -> None:
        """SIGKILL every process of the server now."""
        ...


class _HostGroup:
    """A server started on the host in a process group of its own."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    def kill_tree(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)


class StdioProcess:
    """What a caller may know about a stdio server: its pid (also its process group), whether
    it hung up by itself, its exit status once reaped, and where its stderr went.

    Attributes:
        log_path: The file its stderr is appended to.
        log_offset: Where this run's stderr starts in that file (bytes).
        hung_up: True when the server closed its stdout before the transport was closed (it
            exited or crashed by itself).
        sandboxed: True when it runs in a bubblewrap sandbox (docs/mcp.md, "Sandboxed
            servers").
    """

    def __init__(
        self,
        process: RunningProcess,
        *,
        log_path: Path,
        log_offset: int,
        sandboxed: bool = False,
    ) -> None:
        self._process = process
        self.log_path = log_path
        self.log_offset = log_offset
        self.hung_up = False
        self.sandboxed = sandboxed

    @property
    def pid(self) -> int:
        """The server's pid, which is also its process group id."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status, or None while the leader runs."""
        return self._process.returncode

    def kill(self) -> None:
        """SIGKILL the whole process tree now (a frozen server gets no grace period)."""
        self._process.kill_tree()

    async def reaped(self, limit: float) -> int | None:
        """The exit status once the leader is reaped, waiting at most ``limit`` seconds: a
        server that hung up may not be reaped yet when its transport ends (None: still not)."""
        with anyio.move_on_after(limit):
            while self._process.returncode is None:  # noqa: ASYNC110 - no event for a child's exit
                await anyio.sleep(_POLL)
        return self._process.returncode

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> list[str]:
        """The last ``lines`` lines this run wrote to stderr (sagents' own notes left out)."""
        try:
            with self.log_path.open("rb") as log:
                end = log.seek(0, os.SEEK_END)
                log.seek(max(self.log_offset, end - STDERR_TAIL_BYTES))
                data = log.read(STDERR_TAIL_BYTES)
        except OSError:
            return []
        text = data.decode("utf-8", errors="replace")
        kept = [line for line in text.splitlines() if line and not line.startswith("[sagents]")]
        return kept[-lines:]


class CappedLog:
    """A stdio server's log for one run: its stderr and the notes about its stdout share
    :data:`LOG_BYTES_PER_RUN`; past it, text is dropped after one note.

    With a ``redactor`` (docs/gateway.md, "Secrets"), text is written a whole line at a time
    with the secrets redacted (a secret split across two reads is still found); a line longer
    than :data:`REDACTED_LINE_CHARS` is written in pieces, and :meth:`finish` writes the last
    partial line.
    """

    def __init__(self, log: IO[str], redactor: Redactor | None = None) -> None:
        self._log = log
        self._left = LOG_BYTES_PER_RUN
        self._redactor = redactor if redactor else None
        self._partial = ""

    def write(self, text: str) -> int:
        if self._redactor is None:
            return self._write(text)
        lines, newline, self._partial = (self._partial + text).rpartition("\n")
        if newline:
            self._write(self._redactor.redact(lines + newline))
        if len(self._partial) > REDACTED_LINE_CHARS:
            self.finish()
        return len(text)

    def finish(self) -> None:
        """Write what is held of a last line without its newline (redacted)."""
        if self._partial and self._redactor is not None:
            partial, self._partial = self._partial, ""
            self._write(self._redactor.redact(partial))

    def _write(self, text: str) -> int:
        if self._left <= 0:
            return len(text)
        data = text.encode("utf-8", errors="replace")[: self._left]
        self._left -= len(data)
        self._log.write(data.decode("utf-8", errors="replace"))
        if self._left <= 0:
            self._log.write(f"\n[sagents] stderr beyond {LOG_BYTES_PER_RUN} bytes dropped\n")
        return len(text)

    def flush(self) -> None:
        self._log.flush()


async def copy_stderr(
    stderr: anyio.abc.ByteReceiveStream, log: CappedLog, done: anyio.Event, scope: anyio.CancelScope
) -> None:
    """Copy a server's stderr to ``log`` until EOF; set ``done`` then.

    Runs in ``scope``, a shielded scope the caller cancels once the server is stopped: a
    cancelled caller (a gateway ending on SIGTERM) still gets the lines the server writes
    while it stops.
    """
    try:
        with scope:
            async for chunk in stderr:  # read on past the cap, so the server never blocks
                log.write(chunk.decode("utf-8", errors="replace"))
                log.flush()
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass  # the pipe went away with the tree
    finally:
        log.finish()
        log.flush()
        done.set()


def _parse_line(line: str, log: IO[str] | CappedLog) -> SessionMessage | None:
    if not line.strip():
        return None
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except (ValidationError, ValueError):
        log.write(f"[sagents] ignored a stdout line that is not JSON-RPC: {line[:200]!r}\n")
        log.flush()
        return None


Transport = tuple[
    anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
    WriteStream[SessionMessage],
]


@asynccontextmanager
async def frame_stdio(
    stdin: anyio.abc.ByteSendStream | int,
    stdout: anyio.abc.ByteReceiveStream,
    *,
    encoding: str,
    log: IO[str] | CappedLog,
    handle: StdioProcess,
    stop: Callable[[], Awaitable[None]],
) -> AsyncIterator[Transport]:
    """Frame a server's stdin/stdout as JSON-RPC lines; yield ``(read_stream, write_stream)``.

    Lines are parsed with the SDK's ``jsonrpc_message_adapter``; lines that are not JSON-RPC
    are noted in ``log`` and skipped; invalid UTF-8 is replaced. On exit ``stop`` is awaited,
    shielded, to end the process.

    Requests to a pipe descriptor are written by the sending task (:class:`PipeWriter`); to a
    byte stream, by a writer task that writes the requests ready together at once.

    Args:
        stdin: The server's stdin: the non-blocking write end of its pipe (closed here, before
            ``stop``), or a byte stream.
        stdout: The server's stdout.
        encoding: Text encoding of the lines (``StdioServerParameters.encoding``).
        log: The server's log (notes about skipped lines go there).
        handle: Marked ``hung_up`` when stdout ends, or stdin breaks, before the transport
            closes.
        stop: Ends the server (close stdin, wait, end the tree).
    """
    closing = False
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    def hung_up() -> None:
        # The server stopped reading (EPIPE) before the transport closed: it exited by itself,
        # even when the end of its stdout is not read yet (a child may still hold it).
        if not closing:
            handle.hung_up = True
        read_send.close()  # pending requests fail now

    pipe = (
        PipeWriter(stdin, encoding=encoding, on_broken=hung_up) if isinstance(stdin, int) else None
    )

    async def read_stdout() -> None:
        text = TextReceiveStream(stdout, encoding=encoding, errors="replace")
        async with read_send:
            parts: list[str] = []  # the unfinished line, in pieces (no quadratic re-joins)
            size = 0
            dropping = False  # the current line passed MAX_LINE_CHARS: skip to its end
            with contextlib.suppress(
                anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError
            ):
                async for chunk in text:
                    *ended, rest = chunk.split("\n")
                    for piece in ended:
                        if not dropping:
                            parts.append(piece)
                            message = _parse_line("".join(parts), log)
                            if message is not None:
                                try:  # to the waiting session at once, without a checkpoint
                                    read_send.send_nowait(message)
                                except anyio.WouldBlock:  # it is busy: wait for it
                                    await read_send.send(message)
                        parts, size, dropping = [], 0, False
                    if dropping:
                        continue
                    parts.append(rest)
                    size += len(rest)
                    if size > MAX_LINE_CHARS:
                        log.write(
                            f"[sagents] dropped a stdout line longer than {MAX_LINE_CHARS} "
                            "characters\n"
                        )
                        log.flush()
                        parts, size, dropping = [], 0, True
            if not closing:
                handle.hung_up = True

    async def write_stdin(stdin: anyio.abc.ByteSendStream) -> None:
        try:
            async with write_recv:
                async for message in write_recv:
                    # the requests ready together go out in one write (one wake-up of the server)
                    lines = [message.message.model_dump_json(by_alias=True, exclude_unset=True)]
                    while len(lines) < WRITE_BATCH_MESSAGES:
                        try:
                            ready = write_recv.receive_nowait()
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                        lines.append(
                            ready.message.model_dump_json(by_alias=True, exclude_unset=True)
                        )
                    lines.append("")
                    await stdin.send("\n".join(lines).encode(encoding))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            hung_up()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            if pipe is not None:
                tg.start_soon(pipe.run)
            else:
                assert not isinstance(stdin, int)
                tg.start_soon(write_stdin, stdin)
            try:
                yield read_recv, write_send if pipe is None else pipe
            finally:
                closing = True
                with anyio.CancelScope(shield=True):
                    await write_send.aclose()
                    if pipe is not None:
                        await pipe.aclose()
                        pipe.close_fd()
                    await stop()
                tg.cancel_scope.cancel()
    finally:
        read_recv.close()
        if pipe is not None:
            pipe.close_fd()


def watch_group(pgid: int) -> None:
    """Have the ``atexit`` hook and the watchdog end process group ``pgid`` if we die first."""
    _LIVE_GROUPS.add(pgid)
    _WATCHDOG.watch(pgid)


def forget_group(pgid: int) -> None:
    """Group ``pgid`` ended: neither the hook nor the watchdog may signal it again."""
    _LIVE_GROUPS.discard(pgid)
    _WATCHDOG.forget(pgid)


@asynccontextmanager
async def open_stdio_transport(
    params: StdioServerParameters,
    *,
    log_path: Path,
    on_start: Callable[[StdioProcess], None] | None = None,
    redactor: Redactor | None = None,
) -> AsyncIterator[
    tuple[
        anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
        WriteStream[SessionMessage],
        StdioProcess,
    ]
]:
    """Start a stdio server and yield ``(read_stream, write_stream, process)``.

    The read stream ends (EOF) when the server's stdout closes, that is when it dies.

    Args:
        params: Command, arguments, environment (merged over the SDK's safe default
            environment) and working directory.
        log_path: File the server's stderr is appended to (created with its parents).
        on_start: Called with the process as soon as it runs, so that a caller can report its
            exit status and stderr even when the handshake fails.
        redactor: Secrets redacted from the stderr log (docs/gateway.md, "Secrets").

    Raises:
        OSError: the command cannot be started (not found, not executable).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("a", encoding="utf-8", errors="replace")
    log_offset = log.tell()
    # The server's stdin is a pipe of our own (not the event loop's transport), so that each
    # request is written by the task that sends it (PipeWriter); both ends are close-on-exec.
    stdin_read, stdin_write = os.pipe()
    try:
        os.set_blocking(stdin_write, False)
        process = await anyio.open_process(
            [params.command, *params.args],
            stdin=stdin_read,
            env=get_default_environment() | (params.env or {}),
            stderr=subprocess.PIPE,
            cwd=params.cwd,
            start_new_session=True,
        )
    except BaseException:
        os.close(stdin_write)
        log.close()
        raise
    finally:
        os.close(stdin_read)  # the server's end, now the child's only
    watch_group(process.pid)
    handle = StdioProcess(_HostGroup(process), log_path=log_path, log_offset=log_offset)
    handed = False  # frame_stdio closes stdin_write once it has it
    try:
        if on_start is not None:
            on_start(handle)
        assert process.stdout is not None
        assert process.stderr is not None
        drained = anyio.Event()
        capped = CappedLog(log, redactor)
        copying = anyio.CancelScope(shield=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(copy_stderr, process.stderr, capped, drained, copying)
            try:
                handed = True
                async with frame_stdio(
                    stdin_write,
                    process.stdout,
                    encoding=params.encoding,
                    log=capped,
                    handle=handle,
                    stop=lambda: _stop(process, drained),
                ) as (read_stream, write_stream):
                    yield read_stream, write_stream, handle
            finally:
                copying.cancel()
    finally:
        if not handed:
            os.close(stdin_write)
        forget_group(process.pid)
        log.close()


async def _wait_exit(process: anyio.abc.Process, limit: float) -> bool:
    # Polling, as the SDK does: process.wait() also waits for pipe EOF, which a grandchild
    # holding the pipes would delay.
    with anyio.move_on_after(limit):
        while process.returncode is None:  # noqa: ASYNC110 - no event exists for a child's exit
            await anyio.sleep(_POLL)
        return True
    return False


async def _stop(process: anyio.abc.Process, drained: anyio.Event) -> None:
    """Close stdin, wait, then end the whole process group (even after the leader exited);
    give its stderr a moment to reach the log (``drained``) before the pipes close (its stdin,
    a pipe of our own, is closed already)."""
    assert process.stdout is not None
    await _wait_exit(process, STDIN_CLOSE_GRACE)
    if process.returncode is None or group_alive(process.pid):
        await terminate_posix_process_tree(process, TERM_GRACE)
        if not await _wait_exit(process, _REAP_TIMEOUT):
            logger.warning("MCP server process %d survived SIGKILL; abandoning it", process.pid)
    with anyio.move_on_after(STDERR_DRAIN_SECONDS):
        await drained.wait()  # the last lines belong in the log
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    with (
        anyio.move_on_after(_REAP_TIMEOUT),
        contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError),
    ):
        await process.aclose()

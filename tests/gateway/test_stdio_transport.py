"""The gateway's stdio transport: the SDK's framing, without a thread hand-off per message.

In process over ``os.pipe()`` pairs (the transport's reader and writer, back-pressure, a
closed client end), then through a real subprocess that serves the same low-level server over
the SDK's ``stdio_server`` and over this transport (``fixtures/stdio_echo.py``), so that the
two answer the same bytes the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from sagents.gateway import _stdio_transport
from sagents.gateway._stdin_lines import OVERLONG_LINE
from sagents.gateway._stdio_transport import ReadStream, WriteStream, stdio_streams

ROOT = Path(__file__).resolve().parents[2]
ECHO = Path(__file__).parent / "fixtures" / "stdio_echo.py"
MIB = 1024 * 1024


@contextmanager
def pipes() -> Iterator[tuple[int, int, int, int]]:
    """``(client writes, transport reads, transport writes, client reads)``."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        yield in_w, in_r, out_w, out_r
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            with suppress(OSError):  # some are closed by the test
                os.close(fd)


@asynccontextmanager
async def transport(
    read_fd: int, write_fd: int, **kwargs: Any
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    async with stdio_streams(stdin_fd=read_fd, stdout_fd=write_fd, **kwargs) as streams:
        yield streams


def ping(request_id: int | str, padding: int = 0) -> SessionMessage:
    if padding:
        request = types.JSONRPCRequest(
            jsonrpc="2.0", id=request_id, method="ping", params={"pad": "p" * padding}
        )
    else:
        request = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping")
    return SessionMessage(request)


def read_lines(fd: int, count: int) -> list[bytes]:
    """Read ``count`` whole lines from ``fd`` (blocking; run in a worker thread)."""
    data = bytearray()
    while data.count(b"\n") < count:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        data += chunk
    return bytes(data).splitlines()


async def receive_all(read_stream: ReadStream) -> list[SessionMessage | Exception]:
    return [item async for item in read_stream]


def request_id(item: SessionMessage | Exception) -> Any:
    assert isinstance(item, SessionMessage), item
    assert isinstance(item.message, types.JSONRPCRequest)
    return item.message.id


# Reading ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_lines_split_across_reads_arrive_in_order_and_the_last_needs_no_newline() -> None:
    first = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'
    second = b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n'
    last = b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}'
    with pipes() as (client_w, read_fd, write_fd, _), anyio.fail_after(10):
        async with transport(read_fd, write_fd) as (read_stream, write_stream):
            os.write(client_w, first[:10])
            os.write(client_w, first[10:] + second + last[:5])
            os.write(client_w, last[5:])
            os.close(client_w)  # end of file: the last line counts without its newline
            items = await receive_all(read_stream)
            write_stream.close()
    assert [request_id(item) for item in items] == [1, 2, 3]


@pytest.mark.anyio
async def test_a_line_over_the_cap_is_dropped_as_it_arrives_and_the_next_line_still_arrives() -> (
    None
):
    with pipes() as (client_w, read_fd, write_fd, _), anyio.fail_after(10):
        async with transport(read_fd, write_fd, max_line_bytes=100) as (read_stream, write_stream):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, os.write, client_w, b"x" * 300_000 + b"\n")
                first = await read_stream.receive()
            os.write(client_w, b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}\n' + b"y" * 200)
            os.close(client_w)
            rest = await receive_all(read_stream)
            write_stream.close()
    expected = types.jsonrpc_message_adapter.validate_json  # what the SDK raises for the line
    assert isinstance(first, Exception)
    with pytest.raises(type(first)) as raised:
        expected(OVERLONG_LINE, by_name=False)
    assert str(first) == str(raised.value)
    assert request_id(rest[0]) == 7
    assert isinstance(rest[1], Exception)  # the endless last line, dropped too
    assert len(rest) == 2


@pytest.mark.anyio
async def test_an_invalid_line_becomes_the_sdks_validation_error_and_reading_goes_on() -> None:
    with pipes() as (client_w, read_fd, write_fd, _), anyio.fail_after(10):
        async with transport(read_fd, write_fd) as (read_stream, write_stream):
            os.write(
                client_w,
                b"not json\n\xff\xfe\n" + b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n',
            )
            os.close(client_w)
            items = await receive_all(read_stream)
            write_stream.close()
    for item, line in zip(items[:2], ("not json\n", "\ufffd\ufffd\n"), strict=True):
        assert isinstance(item, Exception)
        with pytest.raises(type(item)) as raised:
            types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        assert str(item) == str(raised.value)
    assert request_id(items[2]) == 1


# Writing ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_10_mib_reply_arrives_whole_through_a_pipe_smaller_than_it() -> None:
    with pipes() as (_, read_fd, write_fd, client_r), anyio.fail_after(60):
        async with transport(read_fd, write_fd) as (_read_stream, write_stream):
            async with anyio.create_task_group() as tg:
                lines: list[list[bytes]] = []

                async def client() -> None:
                    lines.append(await anyio.to_thread.run_sync(read_lines, client_r, 2))

                tg.start_soon(client)
                await write_stream.send(ping(1, padding=10 * MIB))
                await write_stream.send(ping(2))
            write_stream.close()
    big, small = (json.loads(line) for line in lines[0])
    assert big["id"] == 1
    assert big["params"]["pad"] == "p" * (10 * MIB)
    assert small == {"jsonrpc": "2.0", "id": 2, "method": "ping"}


@pytest.mark.anyio
async def test_a_reply_is_on_the_wire_when_its_send_returns() -> None:
    # written by the sending task itself: no hand-off to a writer task per reply
    with pipes() as (_, read_fd, write_fd, client_r), anyio.fail_after(10):
        async with transport(read_fd, write_fd) as (_read_stream, write_stream):
            write_stream.send_nowait(ping(1))
            await write_stream.send(ping(2))
            os.set_blocking(client_r, False)
            written = os.read(client_r, 1 << 16)
            write_stream.close()
    assert [json.loads(line)["id"] for line in written.splitlines()] == [1, 2]


@pytest.mark.anyio
async def test_concurrent_replies_are_written_whole_one_per_line() -> None:
    count = 40
    with pipes() as (_, read_fd, write_fd, client_r), anyio.fail_after(60):
        async with transport(read_fd, write_fd) as (_read_stream, write_stream):
            lines: list[list[bytes]] = []
            async with anyio.create_task_group() as tg:

                async def client() -> None:
                    lines.append(await anyio.to_thread.run_sync(read_lines, client_r, count))

                tg.start_soon(client)
                async with anyio.create_task_group() as senders:
                    for n in range(count):
                        senders.start_soon(write_stream.send, ping(n, padding=50_000 + n))
            write_stream.close()
    replies = [json.loads(line) for line in lines[0]]
    assert sorted(reply["id"] for reply in replies) == list(range(count))
    assert all(reply["params"]["pad"] == "p" * (50_000 + reply["id"]) for reply in replies)


@pytest.mark.anyio
async def test_a_client_that_does_not_read_holds_back_the_servers_sends() -> None:
    with pipes() as (_, read_fd, write_fd, client_r), anyio.fail_after(60):
        async with transport(read_fd, write_fd) as (_read_stream, write_stream):
            await write_stream.send(ping(1, padding=4 * MIB))  # more than the pipe holds
            await anyio.wait_all_tasks_blocked()  # the writer waits for the pipe to drain
            with pytest.raises(anyio.WouldBlock):
                write_stream.send_nowait(ping(2))
            async with anyio.create_task_group() as tg:
                lines: list[list[bytes]] = []

                async def client() -> None:
                    lines.append(await anyio.to_thread.run_sync(read_lines, client_r, 2))

                tg.start_soon(client)
                await write_stream.send(ping(2))  # taken once the client reads
            write_stream.close()
    assert [json.loads(line)["id"] for line in lines[0]] == [1, 2]


@pytest.mark.anyio
async def test_a_closed_client_end_ends_reading_and_later_replies_are_dropped() -> None:
    with pipes() as (client_w, read_fd, write_fd, client_r), anyio.fail_after(10):
        async with transport(read_fd, write_fd) as (read_stream, write_stream):
            os.close(client_r)  # the client went away; its stdin end (client_w) stays open
            await write_stream.send(ping(1))  # EPIPE
            with pytest.raises(anyio.EndOfStream):
                await read_stream.receive()  # the serving loop ends as on end of file
            await write_stream.send(ping(2))  # still accepted, and dropped
            write_stream.close()
        assert os.write(client_w, b"\n") == 1  # stdin itself was never closed by the transport


@pytest.mark.anyio
async def test_a_closed_client_end_ends_a_receive_already_waiting_for_stdin() -> None:
    with pipes() as (client_w, read_fd, write_fd, client_r), anyio.fail_after(10):
        async with transport(read_fd, write_fd) as (read_stream, write_stream):
            ended = anyio.Event()

            async def receive_until_the_end() -> None:
                with pytest.raises(anyio.EndOfStream):
                    await read_stream.receive()  # nothing on stdin: it waits
                ended.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(receive_until_the_end)
                await anyio.wait_all_tasks_blocked()
                os.close(client_r)  # the client went away; its stdin end stays open
                await write_stream.send(ping(1))  # EPIPE
                await ended.wait()
            with pytest.raises(anyio.EndOfStream):
                await read_stream.receive()  # and every later receive
            write_stream.close()
        assert os.write(client_w, b"\n") == 1  # stdin itself was never closed by the transport


def test_a_cap_below_one_byte_is_refused() -> None:
    async def enter() -> None:
        async with stdio_streams(stdin_fd=0, stdout_fd=1, max_line_bytes=0):
            pass

    with pytest.raises(ValueError, match="max_line_bytes"):
        anyio.run(enter)


# Through a real process ---------------------------------------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}  # fmt: skip
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def frame(*messages: object) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def serve(kind: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ECHO), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def replies_until(process: subprocess.Popen[bytes], last_id: int) -> list[bytes]:
    """The lines the process writes up to (and with) the reply of ``last_id``."""
    assert process.stdout is not None
    lines: list[bytes] = []
    while True:
        line = process.stdout.readline()
        assert line, "the server ended before answering"
        lines.append(line)
        if json.loads(line).get("id") == last_id:
            return lines


def finish(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """Close stdin (the client is done), wait for the exit; the code and stderr."""
    _, err = process.communicate(timeout=60)
    return process.returncode, err.decode()


def test_odd_and_invalid_lines_get_the_answers_of_the_sdks_stdio_server() -> None:
    lines = frame(INITIALIZE, INITIALIZED) + (
        b"not json\n\n   \n\xff\xfe{\n"
        b'{"jsonrpc": "2.0", "id": "x"}\n'
        b'{"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}\n'
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call",'
        b' "params": {"name": "echo", "arguments": {"text": "\xc3\xa9\xe2\x82\xac"}}}\n'
    )
    answers = {}
    for kind in ("sdk", "sagents"):
        process = serve(kind)
        assert process.stdin is not None
        process.stdin.write(lines)
        process.stdin.flush()
        answers[kind] = replies_until(process, 3)
        code, err = finish(process)
        assert code == 0, err
    assert answers["sagents"] == answers["sdk"]
    assert json.loads(answers["sagents"][-1])["result"]["content"][0]["text"] == "é€"


def test_stray_output_of_a_handler_on_fd_1_goes_to_stderr_not_to_the_wire() -> None:
    process = serve("sagents")
    assert process.stdin is not None
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_fd1"}}
    process.stdin.write(frame(INITIALIZE, INITIALIZED, call))
    process.stdin.flush()
    replies = [json.loads(line) for line in replies_until(process, 2)]
    code, err = finish(process)
    assert replies[-1]["result"]["content"][0]["text"] == "written"
    assert "stray output on fd 1" in err
    assert "stray output on sys.stdout" in err
    assert code == 0, err
    assert "served to the end" in err


def close_stdout_mid_session(process: subprocess.Popen[bytes], method: str) -> tuple[int, str]:
    """Open the session, stop reading, send one more request: the exit code and stderr."""
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdin.write(frame(INITIALIZE, INITIALIZED))
    process.stdin.flush()
    replies_until(process, 1)
    process.stdout.close()  # the client stops reading; its end of stdin stays open
    process.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": method}))
    process.stdin.flush()
    code = process.wait(timeout=120)
    err = process.stderr.read().decode()
    process.stdin.close()
    process.stderr.close()
    return code, err


def test_a_client_that_closes_the_servers_stdout_ends_it_cleanly() -> None:
    code, err = close_stdout_mid_session(serve("sagents"), "ping")
    assert code == 0, err
    assert "served to the end" in err
    assert "Traceback" not in err


def test_sagents_serve_ends_cleanly_when_its_client_closes_stdout(tmp_path: Path) -> None:
    config = tmp_path / "empty.json"
    config.write_text('{"mcpServers": {}}')
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "sagents"), "serve", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "SAGENTS_DATA_DIR": str(tmp_path / "data")},
    )
    code, err = close_stdout_mid_session(process, "tools/list")
    assert code == 0, err
    assert "Traceback" not in err


@pytest.mark.anyio
async def test_a_character_split_between_two_reads_arrives_whole() -> None:
    line = '{"jsonrpc": "2.0", "id": "caf\u00e9-\u6f22\u5b57", "method": "ping"}\n'.encode()
    cut = line.index("\u6f22".encode()) + 1  # inside the 3-byte character
    with pipes() as (client_w, read_fd, write_fd, _), anyio.fail_after(10):
        async with transport(read_fd, write_fd) as (read_stream, write_stream):
            os.write(client_w, line[:cut])
            first = await anyio.to_thread.run_sync(os.write, client_w, line[cut:])
            os.close(client_w)
            items = await receive_all(read_stream)
            write_stream.close()
    assert first == len(line) - cut
    assert [request_id(item) for item in items] == ["caf\u00e9-\u6f22\u5b57"]


@pytest.mark.anyio
async def test_replies_to_a_regular_file_are_written_whole_one_per_line(tmp_path: Path) -> None:
    out = tmp_path / "stdout.jsonl"
    with pipes() as (client_w, read_fd, _, _), anyio.fail_after(10):
        write_fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            async with transport(read_fd, write_fd) as (_, write_stream):
                async with write_stream:
                    for number in range(20):
                        await write_stream.send(ping(number, padding=100_000))
                os.close(client_w)
        finally:
            os.close(write_fd)
    lines = await anyio.to_thread.run_sync(out.read_bytes)
    assert [json.loads(line)["id"] for line in lines.splitlines()] == list(range(20))


@pytest.mark.anyio
async def test_leaving_ends_even_when_a_terminal_stdout_is_never_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_stdio_transport, "_SHUTDOWN_FLUSH_S", 0.1)
    master, terminal = os.openpty()  # written in a worker thread, which blocks: nobody reads
    drained = threading.Event()

    def drain_late() -> None:  # unblocks the writer if leaving waited for it (the failure)
        if not drained.wait(30):
            with suppress(OSError):
                while os.read(master, 1 << 16):
                    pass

    watchdog = threading.Thread(target=drain_late, daemon=True)
    watchdog.start()
    in_r, in_w = os.pipe()
    try:
        with anyio.fail_after(10):
            async with transport(in_r, terminal) as (_, write_stream):
                await write_stream.send(ping(1, padding=4 * MIB))  # more than the terminal holds
                write_stream.close()
    finally:
        drained.set()
        for fd in (in_r, in_w, terminal, master):
            with suppress(OSError):
                os.close(fd)

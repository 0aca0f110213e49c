"""The stdin writer of a stdio server (``sagents.mcp._pipe_writer.PipeWriter``): each request
written by its sender, the rest of a full pipe by the writer task; lines never torn nor
interleaved, even when a sender is cancelled mid-write; a closed server end fails the senders.
On asyncio and trio, over a real pipe."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from sagents.mcp._pipe_writer import PipeWriter

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _request(request_id: int, text: str) -> SessionMessage:
    return SessionMessage(
        types.JSONRPCRequest(
            jsonrpc="2.0",
            id=request_id,
            method="tools/call",
            params={"name": "echo", "arguments": {"text": text}},
        )
    )


def _line(message: SessionMessage) -> bytes:
    return (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


@contextmanager
def _pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        yield read, write
    finally:
        os.close(read)


@asynccontextmanager
async def _writer(fd: int, broken: list[bool]) -> AsyncIterator[PipeWriter]:
    writer = PipeWriter(fd, encoding="utf-8", on_broken=lambda: broken.append(True))
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        try:
            yield writer
        finally:
            await writer.aclose()
            writer.close_fd()
            tg.cancel_scope.cancel()


async def _read_all(fd: int, size: int) -> bytes:
    os.set_blocking(fd, False)
    data = bytearray()
    while len(data) < size:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            await anyio.wait_readable(fd)
            continue
        if not chunk:
            break
        data += chunk
    return bytes(data)


async def test_each_message_is_one_line_in_the_order_sent() -> None:
    messages = [_request(i, f"m{i}") for i in range(5)]
    with _pipe() as (read, write), anyio.fail_after(10):
        async with _writer(write, []) as writer:
            for message in messages:
                await writer.send(message)
            expected = b"".join(_line(m) for m in messages)
            assert await _read_all(read, len(expected)) == expected


async def test_a_full_pipe_gets_every_message_whole_and_in_order() -> None:
    big = [_request(i, str(i) * 150_000) for i in range(3)]  # each over a pipe's 64 KiB
    expected = b"".join(_line(m) for m in big)
    received = bytearray()
    with _pipe() as (read, write), anyio.fail_after(20):
        async with _writer(write, []) as writer, anyio.create_task_group() as tg:

            async def send_all() -> None:
                for message in big:
                    await writer.send(message)  # waits while the rest of the last one is out

            tg.start_soon(send_all)
            received += await _read_all(read, len(expected))
    assert bytes(received) == expected


async def test_a_sender_cancelled_mid_write_leaves_its_line_whole_for_the_next() -> None:
    first, second = _request(1, "a" * 200_000), _request(2, "b")
    expected = _line(first) + _line(second)
    broken: list[bool] = []
    with _pipe() as (read, write), anyio.fail_after(20):
        async with _writer(write, broken) as writer:
            with anyio.CancelScope() as scope:
                await writer.send(first)  # part written, the rest left to the writer task
                scope.cancel()
                await writer.send(second)  # waits for the rest: cancelled there, not sent
            assert scope.cancelled_caught
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.send, second)
                data = await _read_all(read, len(expected))
    assert data == expected  # no torn line: the first's rest, then the second whole
    assert broken == []


async def test_a_closed_server_end_fails_the_send_and_calls_on_broken_once() -> None:
    broken: list[bool] = []
    with anyio.fail_after(10):
        read, write = os.pipe()
        os.set_blocking(write, False)
        os.close(read)  # the server died
        async with _writer(write, broken) as writer:
            with pytest.raises(anyio.BrokenResourceError):
                await writer.send(_request(1, "x"))
            with pytest.raises(anyio.BrokenResourceError):
                await writer.send(_request(2, "x"))
    assert broken == [True]


async def test_a_server_that_dies_while_a_request_waits_in_a_full_pipe_fails_it() -> None:
    broken: list[bool] = []
    with anyio.fail_after(10):
        read, write = os.pipe()
        os.set_blocking(write, False)
        async with _writer(write, broken) as writer:
            await writer.send(_request(1, "a" * 200_000))  # the pipe is full, the rest waits
            os.close(read)  # the server dies before reading it
            with pytest.raises(anyio.BrokenResourceError):
                await writer.send(_request(2, "b"))
    assert broken == [True]


async def test_sending_after_close_raises_closed_resource_error() -> None:
    with _pipe() as (_read, write), anyio.fail_after(10):
        async with _writer(write, []) as writer:
            await writer.aclose()
            with pytest.raises(anyio.ClosedResourceError):
                await writer.send(_request(1, "x"))


async def test_a_sender_waiting_behind_a_cancelled_writer_task_fails_instead_of_hanging() -> None:
    # The transport's task group is cancelled (the connection closes) while a request's rest
    # waits in a full pipe: the writer task ends without writing it. A sender waiting behind it
    # (the SDK's shielded courtesy cancel of an aborted call) must fail then, not wait for a
    # drain nobody will do: under the SDK's 5 s abandon bound that held every close of a
    # server that stopped reading for 5 s; without a bound, forever.
    outcome: list[str] = []

    async def courtesy_cancel(writer: PipeWriter) -> None:
        with anyio.move_on_after(2, shield=True) as bound:  # as the SDK (5 s)
            try:
                await writer.send(_request(2, "b"))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                outcome.append("failed")
                return
            outcome.append("sent")
        if bound.cancelled_caught:
            outcome.append("gave up")

    with _pipe() as (_read, write), anyio.fail_after(10):
        writer = PipeWriter(write, encoding="utf-8", on_broken=lambda: None)
        async with anyio.create_task_group() as outer, anyio.create_task_group() as transport:
            transport.start_soon(writer.run)
            await writer.send(_request(1, "a" * 200_000))  # the rest waits in a full pipe
            outer.start_soon(courtesy_cancel, writer)
            await anyio.wait_all_tasks_blocked()
            transport.cancel_scope.cancel()  # the connection closes
        writer.close_fd()
    assert outcome == ["failed"]


async def test_the_rest_of_a_request_never_goes_to_a_descriptor_that_reused_the_pipes_number(
    tmp_path: Path,
) -> None:
    # A request's rest is handed to the writer task, and the transport closes the pipe before
    # that task ran (the connection ends in the same tick). The descriptor's number is free
    # then: whatever opens next (another server's pipe, a log file) gets it, and the writer
    # task must not write the rest there.
    log = tmp_path / "someone_elses.log"
    with _pipe() as (_read, write), anyio.fail_after(10):
        writer = PipeWriter(write, encoding="utf-8", on_broken=lambda: None)
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.run)
            await anyio.wait_all_tasks_blocked()
            await writer.send(_request(1, "a" * 200_000))  # the rest is the writer task's
            await writer.aclose()
            writer.close_fd()  # no checkpoint since the send: the writer task has not run
            other = os.open(log, os.O_WRONLY | os.O_CREAT, 0o600)  # the lowest free number
            try:
                reused = other == write
                await anyio.wait_all_tasks_blocked()
            finally:
                os.close(other)
            tg.cancel_scope.cancel()
    assert reused  # the situation the test is about
    assert log.read_bytes() == b""

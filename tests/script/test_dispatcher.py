"""The dispatcher against hostile input, through the in-memory transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.core._result import ToolResult
from sagents.script import _protocol as p
from sagents.script._dispatcher import (
    HOLD_MAX_BYTES,
    OTHER_TOOLS_KEY,
    QUEUE_PER_WORKER,
    ScriptDispatcher,
)
from sagents.script._policy import plan_script
from sagents.script._records import CallRecord
from sagents.script._transport import LineSplitter, OverlongLine, memory_transport_pair
from tests.script.conftest import SPECS, FakeTools

pytestmark = pytest.mark.anyio


@dataclass
class Guest:
    send: MemoryObjectSendStream[bytes]
    receive: MemoryObjectReceiveStream[bytes]
    dispatcher: ScriptDispatcher
    records: list[CallRecord]

    lines: list[bytes] = field(default_factory=list)  # received, not yet read

    async def reply(self) -> dict[str, Any]:
        """The next reply line (several may arrive in one write)."""
        while not self.lines:
            with anyio.fail_after(5):
                data = await self.receive.receive()
            assert data.endswith(b"\n")
            self.lines.extend(data.splitlines())
        parsed: dict[str, Any] = json.loads(self.lines.pop(0))
        return parsed


@asynccontextmanager
async def serving(tools: FakeTools, *, max_calls: int = 2000) -> AsyncIterator[Guest]:
    transport, send, receive = memory_transport_pair()
    records: list[CallRecord] = []
    dispatcher = ScriptDispatcher(
        plan=plan_script(SPECS, [], "auto"),
        call_tool=tools,
        max_calls=max_calls,
        record=records.append,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(dispatcher.serve, transport)
        yield Guest(send=send, receive=receive, dispatcher=dispatcher, records=records)
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"{not json\n", "invalid_json"),
        (b'{"id": 1, "op": "call", "tool": "fleet__get", "args": {"x": NaN}}\n', "invalid_json"),
        (
            b'{"id": 1, "op": "call", "tool": "fleet__get", "args": {"x": Infinity}}\n',
            "invalid_json",
        ),
        (b'{"id": 1, "op": "call", "tool": "fleet__\xff"}\n', "invalid_json"),
        (b'{"id": 1, "id": 2, "op": "tools"}\n', "invalid_json"),
        (b"[" * 100_000 + b"\n", "invalid_json"),
        (b"[1, 2]\n", "bad_request"),
        (b'{"id": true, "op": "tools"}\n', "bad_request"),
        (b'{"id": 1, "op": "call", "tool": 5}\n', "bad_request"),
        (b'{"id": 1, "op": "call", "tool": "fleet__get", "args": []}\n', "bad_request"),
        (b'{"op": "progress", "done": "lots"}\n', "bad_request"),
        (b'{"id": 1, "op": "format_disk"}\n', "unknown_op"),
        (b"x" * (p.MAX_REQUEST_BYTES + 10) + b"\n", "line_too_long"),
    ],
)
async def test_hostile_lines_are_answered_with_an_error_and_the_host_keeps_serving(
    tools: FakeTools, line: bytes, code: str
) -> None:
    async with serving(tools) as guest:
        await guest.send.send(line)
        error = await guest.reply()
        assert error["ok"] is False
        assert error["error"]["code"] == code
        await guest.send.send(
            b'{"id": 9, "op": "call", "tool": "fleet__get", "args": {"sn": "A"}}\n'
        )
        reply = await guest.reply()
        assert reply["id"] == 9
        assert reply["result"]["structured"] == {"sn": "A", "tool": "fleet__get"}
    assert guest.dispatcher.protocol_errors == 1


async def test_an_error_attributable_to_an_id_is_answered_to_that_id(tools: FakeTools) -> None:
    async with serving(tools) as guest:
        await guest.send.send(b'{"id": "abc", "op": "describe"}\n')
        reply = await guest.reply()
    assert (reply["id"], reply["error"]["code"]) == ("abc", "bad_request")


async def test_a_duplicate_id_in_flight_is_refused_without_disturbing_the_first(
    tools: FakeTools,
) -> None:
    tools.block = anyio.Event()
    async with serving(tools) as guest:
        request = b'{"id": 5, "op": "call", "tool": "fleet__get", "args": {"sn": "A"}}\n'
        await guest.send.send(request)
        with anyio.fail_after(5):
            await tools.started.wait()
        await guest.send.send(request)
        refused = await guest.reply()
        tools.block.set()
        first = await guest.reply()
    assert (refused["id"], refused["error"]["code"]) == (None, "duplicate_id")
    assert (first["id"], first["ok"]) == (5, True)
    assert len(tools.calls) == 1


async def test_a_raising_tool_is_an_error_result_of_the_tool_managers_boundary() -> None:
    from sagents.core._spec import ToolSpec
    from sagents.tool._handler import ToolCall
    from sagents.tool.tool_manager import ToolManager

    async def boom(arguments: dict[str, Any], call: ToolCall) -> Any:
        raise RuntimeError("boom")

    spec = ToolSpec(name="fleet__boom", permission="read_only")
    manager = ToolManager()
    manager.register_tool((spec, boom))
    transport, send, receive = memory_transport_pair()
    dispatcher = ScriptDispatcher(
        plan=plan_script([spec], [], "auto"),
        call_tool=lambda name, arguments: manager.run_tool(name, arguments),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(dispatcher.serve, transport)
        await send.send(b'{"id": 1, "op": "call", "tool": "fleet__boom"}\n')
        with anyio.fail_after(5):
            reply = json.loads(await receive.receive())
        tg.cancel_scope.cancel()
    assert reply["ok"] is True
    assert reply["result"]["is_error"] is True
    assert reply["result"]["error"] == {
        "code": "execution_error",
        "message": "tool 'fleet__boom' failed: RuntimeError: boom",
    }


async def test_serve_returns_at_end_of_stream_after_queued_calls_finish(tools: FakeTools) -> None:
    transport, send, _receive = memory_transport_pair()
    dispatcher = ScriptDispatcher(plan=plan_script(SPECS, [], "auto"), call_tool=tools)
    lines = b"".join(
        b'{"id": %d, "op": "call", "tool": "fleet__get", "args": {}}\n' % i for i in range(10)
    )
    await send.send(lines)
    await send.aclose()
    with anyio.fail_after(5):
        await dispatcher.serve(transport)
    assert len(tools.calls) == 10
    assert dispatcher.counters().calls == 10
    assert tools.peak <= 4


async def test_a_guest_that_stopped_reading_does_not_break_the_host(tools: FakeTools) -> None:
    transport, send, receive = memory_transport_pair()
    receive.close()
    dispatcher = ScriptDispatcher(plan=plan_script(SPECS, [], "auto"), call_tool=tools)
    await send.send(
        b'{"id": 1, "op": "call", "tool": "fleet__get", "args": {}}\n{"id": 2, "op": "tools"}\n'
    )
    await send.aclose()
    with anyio.fail_after(5):
        await dispatcher.serve(transport)
    assert dispatcher.counters().calls == 1


async def test_progress_notices_update_the_counters_without_a_reply(tools: FakeTools) -> None:
    async with serving(tools) as guest:
        await guest.send.send(b'{"op": "progress", "done": 3, "total": 10, "message": "m"}\n')
        await guest.send.send(b'{"id": 1, "op": "tools"}\n')
        reply = await guest.reply()
        assert reply["id"] == 1
        counters = guest.dispatcher.counters()
    assert (counters.done, counters.total, counters.message) == (3, 10, "m")


def test_the_line_splitter_drops_overlong_lines_across_chunks() -> None:
    splitter = LineSplitter(max_bytes=10)
    splitter.feed(b"short\n0123456")
    splitter.feed(b"789abcdef")
    splitter.feed(b"XYZ\nok\ntail")
    splitter.finish()
    assert splitter.pop() == b"short"
    assert splitter.pop() == OverlongLine(size=19)
    assert splitter.pop() == b"ok"
    assert splitter.pop() == b"tail"
    assert splitter.pop() is None


def test_invalid_max_limits_are_refused(tools: FakeTools) -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        ScriptDispatcher(plan=plan_script(SPECS, [], "auto"), call_tool=tools, max_concurrency=0)


async def test_a_tool_name_over_the_mcp_limit_is_refused_unrecorded_and_uncounted(
    tools: FakeTools,
) -> None:
    async with serving(tools) as guest:
        name = "x" * (p.MAX_TOOL_NAME_CHARS + 1)
        await guest.send.send(p.encode_line({"id": 1, "op": "call", "tool": name}))
        reply = await guest.reply()
        await guest.send.send(p.encode_line({"id": 2, "op": "call", "tool": "x" * 128}))
        second = await guest.reply()
    assert reply["error"]["code"] == "bad_request"
    assert name not in json.dumps(reply)  # never echoed
    assert second["error"]["code"] == "unknown_tool"
    assert [r.tool for r in guest.records] == ["x" * 128]
    assert guest.dispatcher.counters().calls_per_tool == {OTHER_TOOLS_KEY: 1}


async def test_made_up_tool_names_are_counted_under_one_key(tools: FakeTools) -> None:
    async with serving(tools) as guest:
        for i in range(50):
            await guest.send.send(p.encode_line({"id": i, "op": "call", "tool": f"nope_{i}"}))
            await guest.reply()
        await guest.send.send(p.encode_line({"id": 99, "op": "call", "tool": "fleet__get"}))
        await guest.reply()
    assert guest.dispatcher.counters().calls_per_tool == {OTHER_TOOLS_KEY: 50, "fleet__get": 1}


async def test_calls_waiting_for_a_worker_are_few_the_rest_stay_unread(tools: FakeTools) -> None:
    tools.block = anyio.Event()
    async with serving(tools) as guest:
        for i in range(200):
            line = {"id": i, "op": "call", "tool": "fleet__get", "args": {"pad": "x" * 1000}}
            guest.send.send_nowait(p.encode_line(line))
        with anyio.fail_after(5):
            while len(tools.calls) < 4:
                await anyio.lowlevel.checkpoint()  # let the dispatcher read what it will
            for _ in range(100):
                await anyio.lowlevel.checkpoint()
        accepted = guest.dispatcher.counters().calls
        tools.block.set()
        replies = [await guest.reply() for _ in range(200)]
    assert accepted <= 4 + QUEUE_PER_WORKER * 4 + 1  # in flight, queued, one being handed over
    assert sorted(r["id"] for r in replies) == list(range(200))


async def test_replies_of_calls_that_finish_together_leave_in_one_write() -> None:
    tools = FakeTools(block=anyio.Event())
    transport, send, receive = memory_transport_pair()
    records: list[CallRecord] = []
    dispatcher = ScriptDispatcher(
        plan=plan_script(SPECS, [], "auto"), call_tool=tools, record=records.append
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(dispatcher.serve, transport)
        await send.send(
            b"".join(
                b'{"id": %d, "op": "call", "tool": "fleet__get", "args": {"sn": "%d"}}\n' % (i, i)
                for i in range(3)
            )
        )
        with anyio.fail_after(5):
            while tools.in_flight < 3:
                await anyio.lowlevel.checkpoint()
            assert tools.block is not None
            tools.block.set()  # all three finish in the same loop tick
            data = await receive.receive()
        tg.cancel_scope.cancel()
    replies = [json.loads(line) for line in data.splitlines()]
    assert sorted(reply["id"] for reply in replies) == [0, 1, 2]
    assert all(reply["ok"] for reply in replies)
    assert len(records) == 3


@dataclass(kw_only=True)
class GatedTools:
    """``fleet__get`` waits for its own gate (by ``sn``); ``fleet__text`` answers at once."""

    gates: dict[str, anyio.Event] = field(default_factory=dict)
    text: str = "plain"

    async def __call__(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name == "fleet__get":
            await self.gates.setdefault(str(arguments["sn"]), anyio.Event()).wait()
            return ToolResult.from_structured({"sn": arguments["sn"]})
        await anyio.lowlevel.checkpoint()
        return ToolResult.from_text(self.text)


def _calls(tool: str, ids: range) -> bytes:
    return b"".join(
        p.encode_line({"id": i, "op": "call", "tool": tool, "args": {"sn": str(i)}}) for i in ids
    )


@asynccontextmanager
async def gated(tools: GatedTools, *, hold_max_s: float) -> AsyncIterator[Guest]:
    transport, send, receive = memory_transport_pair()
    records: list[CallRecord] = []
    dispatcher = ScriptDispatcher(
        plan=plan_script(SPECS, [], "auto"),
        call_tool=tools,
        record=records.append,
        hold_max_s=hold_max_s,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(dispatcher.serve, transport)
        yield Guest(send=send, receive=receive, dispatcher=dispatcher, records=records)
        tg.cancel_scope.cancel()


async def test_replies_wait_for_a_batch_while_calls_queue_up_and_every_call_gets_one() -> None:
    tools = GatedTools()
    async with gated(tools, hold_max_s=3600) as guest:
        await guest.send.send(_calls("fleet__get", range(40)))
        writes: list[bytes] = []
        with anyio.fail_after(5):
            for i in range(10):  # 30 calls still wait: every reply can wait for a batch
                while str(i) not in tools.gates:
                    await anyio.lowlevel.checkpoint()
                tools.gates[str(i)].set()
                while len(guest.records) <= i:
                    await anyio.lowlevel.checkpoint()
            with pytest.raises(anyio.WouldBlock):
                guest.receive.receive_nowait()
            for i in range(10, 40):
                while str(i) not in tools.gates:
                    await anyio.lowlevel.checkpoint()
                tools.gates[str(i)].set()
            while sum(data.count(b"\n") for data in writes) < 40:
                writes.append(await guest.receive.receive())
    replies = [json.loads(line) for data in writes for line in data.splitlines()]
    assert sorted(reply["id"] for reply in replies) == list(range(40))
    assert all(reply["ok"] and reply["result"]["structured"] for reply in replies)
    assert len(writes) < 40
    assert len(guest.records) == 40


async def test_a_reply_is_not_held_when_few_calls_wait() -> None:
    tools = GatedTools()
    async with gated(tools, hold_max_s=3600) as guest:
        await guest.send.send(_calls("fleet__get", range(3)) + _calls("fleet__text", range(3, 5)))
        assert {(await guest.reply())["id"], (await guest.reply())["id"]} == {3, 4}


async def test_a_held_reply_leaves_within_the_bound_when_no_other_call_ends() -> None:
    tools = GatedTools()
    async with gated(tools, hold_max_s=0.01) as guest:
        # Three workers stay busy, the fourth answers one call, then 30 calls wait behind it.
        lines = _calls("fleet__get", range(3)) + _calls("fleet__text", range(3, 4))
        await guest.send.send(lines + _calls("fleet__get", range(4, 34)))
        reply = await guest.reply()
    assert reply["id"] == 3
    assert reply["result"]["text"] == "plain"


async def test_held_replies_past_the_byte_bound_are_written_at_once() -> None:
    tools = GatedTools(text="x" * HOLD_MAX_BYTES)
    async with gated(tools, hold_max_s=3600) as guest:
        lines = _calls("fleet__get", range(3)) + _calls("fleet__text", range(3, 4))
        await guest.send.send(lines + _calls("fleet__get", range(4, 34)))
        reply = await guest.reply()
    assert reply["id"] == 3


@dataclass(kw_only=True)
class StalledTransport:
    """A script that stopped reading fd 4: every write waits until ``reading`` is set."""

    incoming: MemoryObjectReceiveStream[bytes]
    reading: anyio.Event = field(default_factory=anyio.Event)
    written: list[bytes] = field(default_factory=list)
    lines: int = 0
    splitter: LineSplitter = field(default_factory=LineSplitter)

    async def receive_line(self) -> bytes | OverlongLine | None:
        while (line := self.splitter.pop()) is None:
            try:
                self.splitter.feed(await self.incoming.receive())
            except anyio.EndOfStream:
                return None
        return line

    async def send_line(self, data: bytes) -> None:
        await self.reading.wait()
        self.written.append(data)
        self.lines += data.count(b"\n")


async def test_replies_to_a_script_that_stopped_reading_stay_bounded_then_all_arrive() -> None:
    big = 20_000
    calls = 0

    async def text(name: str, arguments: dict[str, Any]) -> ToolResult:
        nonlocal calls
        calls += 1
        await anyio.lowlevel.checkpoint()
        return ToolResult.from_text("x" * big)

    send, receive = anyio.create_memory_object_stream[bytes](1000)
    transport = StalledTransport(incoming=receive)
    dispatcher = ScriptDispatcher(plan=plan_script(SPECS, [], "auto"), call_tool=text)
    async with anyio.create_task_group() as tg:
        tg.start_soon(dispatcher.serve, transport)
        await send.send(_calls("fleet__text", range(300)))
        for _ in range(3000):
            await anyio.lowlevel.checkpoint()  # everything the dispatcher would do unread
        stalled_at = calls
        transport.reading.set()
        with anyio.fail_after(10):
            while transport.lines < 300:
                await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    # Unbounded, all 300 calls (6 MB of replies) would have run while nothing was read.
    assert stalled_at * big < 4 * 1024 * 1024
    replies = [json.loads(line) for data in transport.written for line in data.splitlines()]
    assert sorted(reply["id"] for reply in replies) == list(range(300))
    assert calls == 300


@dataclass(kw_only=True)
class SlowReaderTransport(StalledTransport):
    """A script that reads fd 4 slowly: a write waits until ``reading`` is set; ``writing`` is
    set once a write waits."""

    writing: anyio.Event = field(default_factory=anyio.Event)

    async def send_line(self, data: bytes) -> None:
        self.writing.set()
        await super().send_line(data)


async def test_replies_a_held_batch_write_still_owes_reach_the_script_before_serve_returns() -> (
    None
):
    # The flusher writes held replies; the script reads slowly, so that write waits. Meanwhile
    # every call finishes (their replies queue behind the flusher's write) and the script closes
    # fd 3. Serve must not return (and cancel the flusher mid-write) before they are out:
    # before the hold, the worker that wrote the batch finished its write inside serve.
    tools = GatedTools()
    send, receive = anyio.create_memory_object_stream[bytes](1000)
    transport = SlowReaderTransport(incoming=receive)
    records: list[CallRecord] = []
    dispatcher = ScriptDispatcher(
        plan=plan_script(SPECS, [], "auto"),
        call_tool=tools,
        record=records.append,
        hold_max_s=0.0,
    )
    served = anyio.Event()

    async def serve() -> None:
        await dispatcher.serve(transport)
        served.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            await send.send(_calls("fleet__get", range(40)))
            while "0" not in tools.gates:
                await anyio.lowlevel.checkpoint()
            tools.gates["0"].set()  # 30+ calls still queue: its reply is held, then flushed
            await transport.writing.wait()  # the flusher's write waits for the slow reader
            for i in range(1, 40):
                while str(i) not in tools.gates:
                    await anyio.lowlevel.checkpoint()
                tools.gates[str(i)].set()
            await send.aclose()  # the script sent everything (fd 3 at its end)
            while len(records) < 40:
                await anyio.lowlevel.checkpoint()
            for _ in range(100):
                await anyio.lowlevel.checkpoint()  # serve's end, if it does not wait
            transport.reading.set()  # the script reads on
            await served.wait()
    replies = [json.loads(line) for data in transport.written for line in data.splitlines()]
    assert sorted(reply["id"] for reply in replies) == list(range(40))

"""The host side of a script's requests: checks, limits, queueing, dispatch
(docs/run_script.md, "How it runs").

:class:`ScriptDispatcher` reads requests from a :class:`~sagents.script._transport.ScriptTransport`
and answers each one. It survives anything a script sends: invalid JSON, overlong lines,
NaN/Infinity, invalid UTF-8, unknown operations, duplicate ids, a closed descriptor, an exit
mid-call. Each is answered with an error or ignored; none ends the host.

Every ``call`` is counted, checked against the run's :class:`~sagents.script._policy.ScriptPlan`
and the call limit, queued, and run by at most ``max_concurrency`` workers through the
``call_tool`` seam, the same path as a direct call (the integration wires it to
``ToolProxy.run_tool``). Each call that was dispatched or refused is recorded. Cancelling
:meth:`ScriptDispatcher.serve` cancels the calls in flight (and, through ``call_tool``, upstream).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.core._result import ToolResult
from sagents.core._tracing import end_tool_span, tool_span, tracing, unsampled
from sagents.script import _protocol as p
from sagents.script._policy import ScriptPlan
from sagents.script._records import CallRecord, summarize
from sagents.script._stubs import StubCatalog, stub_catalog
from sagents.script._transport import OverlongLine, ScriptTransport

__all__ = [
    "HOLD_MAX_BYTES",
    "HOLD_MAX_S",
    "HOLD_QUEUED_PER_WORKER",
    "MAX_TRACED_CALLS",
    "OTHER_TOOLS_KEY",
    "QUEUE_PER_WORKER",
    "REPLY_BACKLOG_BYTES",
    "CallTool",
    "DispatchCounters",
    "ScriptDispatcher",
    "result_payload",
]

MAX_TRACED_CALLS = 100
"""Calls of one run that get a span each (docs/observability.md, "Traces"): a script of
thousands of calls gives its run span their counts, not thousands of spans; the later calls run
in the trace marked not sampled, so the spans they open (the MCP SDK's upstream request) are
left out too."""
OTHER_TOOLS_KEY = "<other>"
"""The ``calls_per_tool`` key counting calls of names neither callable nor refused by the plan:
a script cannot grow the counters (or run.json, the audit entry, ``--json``) with made-up names."""
QUEUE_PER_WORKER = 4  # accepted calls waiting per worker before fd 3 is no longer read
# Replies are held back (and then leave in one write) only while at least this many accepted
# calls per worker wait for one: the workers have work for rounds to come, so a reply sent
# later slows no call down, and the script's reader wakes once per batch instead of per reply.
HOLD_QUEUED_PER_WORKER = 2
HOLD_MAX_BYTES = 64 * 1024  # held replies past this size are written at once (a pipe's buffer)
HOLD_MAX_S = 0.05  # no reply is held longer than this, in seconds
# Replies queued behind a write that waits (the script does not read fd 4) past this size make
# the calls that finish wait too: workers then take no new call, the queue fills, and fd 3 is
# no longer read, so a script that stops reading holds at most this much of the host's memory.
REPLY_BACKLOG_BYTES = 1024 * 1024

CallTool = Callable[[str, dict[str, Any]], Awaitable[ToolResult]]
"""``async def call_tool(name, arguments) -> ToolResult``: one tool call, the direct-call path.
A failed call comes back as its error result (``ToolManager.run_tool`` is the one boundary); an
exception from it is a broken seam, and ends the run."""


_SHOWN_NAME_CHARS = 80  # a module name the script asked for, echoed in an error


def _shown(name: str) -> str:
    """``name`` quoted for an error message, cut (any length reaches the host: a request may
    be megabytes)."""
    if len(name) <= _SHOWN_NAME_CHARS:
        return repr(name)
    return f"{name[:_SHOWN_NAME_CHARS]!r}... ({len(name):,} characters)"


def result_payload(result: ToolResult, text: str | None = None) -> dict[str, Any]:
    """The ``result`` object of a call reply: ``{"text", "structured", "is_error", "error"}``
    (``text``: ``result.text`` when the caller has it already)."""
    error = None
    if result.error is not None:
        error = {"code": result.error.code, "message": result.error.message}
    return {
        "text": result.text if text is None else text,
        "structured": result.structured,
        "is_error": result.is_error,
        "error": error,
    }


@dataclass(frozen=True, kw_only=True)
class DispatchCounters:
    """A snapshot of a run's calls and the script's own progress.

    Attributes:
        calls: Call requests received (refused ones included).
        failed: Calls that failed or were refused.
        calls_per_tool: Calls per tool name (of calls under the limit); names the plan does
            not know are counted under :data:`OTHER_TOOLS_KEY`.
        done: The script's last ``progress`` done value, if any.
        total: Its total, if any.
        message: Its message, if any.
    """

    calls: int = 0
    failed: int = 0
    calls_per_tool: Mapping[str, int] | None = None
    done: float | None = None
    total: float | None = None
    message: str | None = None


class ScriptDispatcher:
    """Serves one script's requests.

    Args:
        plan: Which tools the script may call, and why others are refused.
        call_tool: The seam that runs one tool call.
        max_calls: Tool calls allowed per script (``scripts.maxCalls``); later ones are refused.
        max_concurrency: Calls in flight at once (``scripts.maxConcurrency``).
        record: Called with each call's record (dispatched, refused or cancelled).
        on_change: Called (synchronously, must not block) whenever counters or progress change.
        hold_max_s: The longest a reply is held back for a batch, in seconds (see
            :meth:`_reply`).
    """

    def __init__(
        self,
        *,
        plan: ScriptPlan,
        call_tool: CallTool,
        max_calls: int = 2000,
        max_concurrency: int = 4,
        record: Callable[[CallRecord], None] | None = None,
        on_change: Callable[[], None] | None = None,
        hold_max_s: float = HOLD_MAX_S,
    ) -> None:
        if max_calls < 0 or max_concurrency < 1 or hold_max_s < 0:
            raise ValueError("max_calls must be >= 0, max_concurrency >= 1 and hold_max_s >= 0")
        self._plan = plan
        self._stubs: StubCatalog | None = None  # made on the first stubs request
        self._call_tool = call_tool
        self._max_calls = max_calls
        self._max_concurrency = max_concurrency
        self._record = record
        self._on_change = on_change
        self._in_flight: set[p.RequestId] = set()
        self._replies: list[bytes] = []  # reply lines queued for the next write
        self._replies_bytes = 0
        self._writing = False  # a task is writing the queued replies
        self._taken = anyio.Event()  # set when the writer takes the queued replies (or stops)
        self._queued = 0  # accepted calls not yet taken by a worker
        self._hold_at = HOLD_QUEUED_PER_WORKER * max_concurrency
        self._held = anyio.Event()  # set when a reply is held: the flusher bounds its wait
        self._hold_max_s = hold_max_s
        self._peer_gone = False
        self._calls = 0
        self._failed = 0
        self._traced = 0
        self._per_tool: Counter[str] = Counter()
        self._limit_recorded = False
        self._progress: tuple[float | None, float | None, str | None] = (None, None, None)
        self.protocol_errors = 0
        """Lines that broke the protocol (answered with an error or ignored)."""

    def counters(self) -> DispatchCounters:
        """The current counters."""
        done, total, message = self._progress
        return DispatchCounters(
            calls=self._calls,
            failed=self._failed,
            calls_per_tool=dict(self._per_tool),
            done=done,
            total=total,
            message=message,
        )

    async def serve(self, transport: ScriptTransport) -> None:
        """Answer requests until the script closes fd 3 and queued calls are done.

        Cancel it to cancel the calls in flight; their records say ``cancelled``.
        """
        send, receive = anyio.create_memory_object_stream[p.CallRequest](
            QUEUE_PER_WORKER * self._max_concurrency
        )
        workers = _Countdown(self._max_concurrency)
        # One task group: the workers, the flusher of held replies, and this task reading.
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._flush_held, transport)
            async with receive:
                for _ in range(self._max_concurrency):
                    tg.start_soon(self._worker, receive.clone(), transport, workers)
            async with send:
                await self._read_requests(transport, send)
            await workers.reached_zero()  # each takes what is queued, then its queue ends
            # A write under way (the flusher's, with replies queued behind it) ends first: the
            # flusher must not be cancelled in the middle of it. Then anything still held.
            while self._writing:
                await self._taken.wait()
            await self._write(transport)
            tg.cancel_scope.cancel()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    async def _reply(self, transport: ScriptTransport, data: bytes) -> None:
        """Queue a reply line; write every queued line at once, unless the workers have enough
        waiting calls that the replies can wait for a batch.

        A reply is held while at least :data:`HOLD_QUEUED_PER_WORKER` accepted calls per
        worker wait in the queue (then no worker would start a call sooner if the script got
        its reply now), up to :data:`HOLD_MAX_BYTES` of replies and at most
        ``hold_max_s`` (see :meth:`_flush_held`). Otherwise the first task to queue a
        reply writes: while other calls are in flight it lets them run once first, so replies
        of calls that finish in the same loop tick leave in one write, which wakes the
        script's reader once. A task that finds a writer at work returns at once; the writer
        sends its line in the next batch, in the order queued.
        """
        if self._peer_gone:
            return
        self._replies.append(data)
        self._replies_bytes += len(data)
        if self._writing:
            # Back-pressure: past the backlog bound, wait for the writer to take the queue.
            while self._writing and self._replies_bytes > REPLY_BACKLOG_BYTES:
                await self._taken.wait()
            return
        if self._queued >= self._hold_at and self._replies_bytes < HOLD_MAX_BYTES:
            if len(self._replies) == 1:
                self._held.set()
            return
        await self._write(transport, yield_first=bool(self._in_flight))

    async def _write(self, transport: ScriptTransport, *, yield_first: bool = False) -> None:
        """Write the queued replies (and those queued meanwhile) unless a writer is at work."""
        if self._writing or not self._replies:
            return
        self._writing = True
        try:
            if yield_first:
                await anyio.lowlevel.cancel_shielded_checkpoint()
            while self._replies and not self._peer_gone:
                batch = b"".join(self._replies)
                self._replies.clear()
                self._replies_bytes = 0
                self._taken_now()
                try:
                    await transport.send_line(batch)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    self._peer_gone = True
        finally:
            self._writing = False
            self._taken_now()

    def _taken_now(self) -> None:
        """Wake the calls waiting for the writer to take the queued replies."""
        self._taken.set()
        self._taken = anyio.Event()

    async def _flush_held(self, transport: ScriptTransport) -> None:
        """Write held replies at most ``hold_max_s`` after the first of them was held."""
        while True:
            await self._held.wait()
            self._held = anyio.Event()
            await anyio.sleep(self._hold_max_s)
            await self._write(transport)

    async def _error(
        self, transport: ScriptTransport, request_id: p.RequestId | None, code: str, message: str
    ) -> None:
        await self._reply(transport, p.encode_error_reply(request_id, code, message))

    async def _read_requests(
        self, transport: ScriptTransport, queue: MemoryObjectSendStream[p.CallRequest]
    ) -> None:
        while True:
            line = await transport.receive_line()
            if line is None:
                return
            if isinstance(line, OverlongLine):
                self.protocol_errors += 1
                await self._error(
                    transport,
                    None,
                    p.ERROR_LINE_TOO_LONG,
                    f"request line of {line.size} bytes over the {p.MAX_REQUEST_BYTES}-byte cap",
                )
                continue
            if not line.strip():
                continue
            try:
                request = p.parse_request(line)
            except p.ProtocolError as error:
                self.protocol_errors += 1
                await self._error(transport, error.request_id, error.code, error.message)
                continue
            if isinstance(request, p.ProgressNotice):
                self._progress = (request.done, request.total, request.message)
                self._changed()
                if request.id is not None:
                    await self._reply(transport, p.encode_ok_reply(request.id, None))
                continue
            if request.id in self._in_flight:
                self.protocol_errors += 1
                await self._error(
                    transport, None, p.ERROR_DUPLICATE_ID, f"id {request.id!r} is already in use"
                )
                continue
            if isinstance(request, p.ToolsRequest):
                await self._reply(transport, p.encode_ok_reply(request.id, self._tool_list()))
            elif isinstance(request, p.DescribeRequest):
                await self._describe(transport, request)
            elif isinstance(request, p.StubsRequest):
                await self._stubs_source(transport, request)
            else:
                await self._accept_call(transport, queue, request)

    def _tool_list(self) -> list[dict[str, Any]]:
        return [
            {"name": spec.name, "description": spec.summary, "permission": spec.permission}
            for spec in self._plan.callable.values()
        ]

    def _refusal(self, tool: str) -> tuple[str, str] | None:
        if tool in self._plan.callable:
            return None
        if tool in self._plan.refusals:
            return p.ERROR_NOT_ALLOWED, self._plan.refusals[tool]
        return (
            p.ERROR_UNKNOWN_TOOL,
            f"no tool {tool!r} is available to this script; tools() lists the callable ones",
        )

    async def _describe(self, transport: ScriptTransport, request: p.DescribeRequest) -> None:
        refusal = self._refusal(request.tool)
        if refusal is not None:
            await self._error(transport, request.id, *refusal)
            return
        spec = self._plan.callable[request.tool]
        description = {
            "name": spec.name,
            "description": spec.description,
            "input_schema": dict(spec.input_schema),
            "output_schema": dict(spec.output_schema) if spec.output_schema else None,
            "permission": spec.permission,
        }
        await self._reply(transport, p.encode_ok_reply(request.id, description))

    async def _stubs_source(self, transport: ScriptTransport, request: p.StubsRequest) -> None:
        if self._stubs is None:
            self._stubs = stub_catalog(self._plan.offered or self._plan.callable.values())
        source = self._stubs.source(request.module)
        if source is None:
            names = ", ".join(sorted(self._stubs.modules)) or "none"
            await self._error(
                transport,
                request.id,
                p.ERROR_UNKNOWN_MODULE,
                f"no stubs module {_shown(request.module)} in this run (there are: {names})",
            )
            return
        await self._reply(transport, p.encode_ok_reply(request.id, {"source": source}))

    def _write_record(
        self,
        request: p.CallRequest,
        ts: float,
        duration: float,
        code: str | None,
        text: str,
        *,
        is_error: bool,
    ) -> None:
        if self._record is not None:
            self._record(
                CallRecord(
                    ts=ts,
                    tool=request.tool,
                    arguments=request.args,
                    duration_s=round(duration, 6),
                    is_error=is_error,
                    error_code=code,
                    summary=summarize(text),
                )
            )

    async def _accept_call(
        self,
        transport: ScriptTransport,
        queue: MemoryObjectSendStream[p.CallRequest],
        request: p.CallRequest,
    ) -> None:
        self._calls += 1
        if self._calls > self._max_calls:
            self._failed += 1
            message = (
                f"call limit reached: a script may make at most {self._max_calls} tool calls "
                "(scripts.maxCalls)"
            )
            if (
                not self._limit_recorded
            ):  # record the first refusal only: a loop cannot fill the disk
                self._limit_recorded = True
                self._write_record(request, time.time(), 0.0, p.ERROR_LIMIT, message, is_error=True)
            self._changed()
            await self._error(transport, request.id, p.ERROR_LIMIT, message)
            return
        known = request.tool in self._plan.callable or request.tool in self._plan.refusals
        self._per_tool[request.tool if known else OTHER_TOOLS_KEY] += 1  # bounded by the plan
        refusal = self._refusal(request.tool)
        if refusal is not None:
            self._failed += 1
            self._write_record(request, time.time(), 0.0, refusal[0], refusal[1], is_error=True)
            self._changed()
            await self._error(transport, request.id, *refusal)
            return
        self._in_flight.add(request.id)
        self._changed()
        # A short queue: when the workers are behind, stop reading fd 3 (the script's writes
        # then block) rather than hold up to max_calls request lines of 4 MiB in memory.
        self._queued += 1
        try:
            queue.send_nowait(request)
        except anyio.WouldBlock:
            await queue.send(request)

    async def _worker(
        self,
        queue: MemoryObjectReceiveStream[p.CallRequest],
        transport: ScriptTransport,
        workers: _Countdown,
    ) -> None:
        with workers.counting_down():
            await self._take_calls(queue, transport)

    async def _take_calls(
        self, queue: MemoryObjectReceiveStream[p.CallRequest], transport: ScriptTransport
    ) -> None:
        async with queue:
            while True:
                # A waiting request is taken at once: ``receive`` would first yield to the loop,
                # one more turn per call. The worker still yields wherever its call or reply
                # waits, and finds at most the queue's few requests waiting in between.
                try:
                    request = queue.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        request = await queue.receive()
                    except anyio.EndOfStream:
                        return
                except anyio.EndOfStream:
                    return
                self._queued -= 1
                await self._run_call(transport, request)

    async def _run_call(self, transport: ScriptTransport, request: p.CallRequest) -> None:
        if self._traced < MAX_TRACED_CALLS and tracing():
            # the first calls of a run get a span each, the rest only their run's counts
            self._traced += 1
            attributes = {"sagents.script.call": request.id}
            with tool_span(request.tool, arguments=request.args, attributes=attributes) as current:
                result = await self._call_and_reply(transport, request)
                end_tool_span(current, result.error.code if result.error else "ok", result.text)
        elif self._traced >= MAX_TRACED_CALLS:  # past the cap (only ever reached when traced)
            # nor the spans the call opens (the MCP SDK's upstream request): its trace goes on
            # marked not sampled (docs/observability.md, "Scripts of many calls")
            with unsampled():
                await self._call_and_reply(transport, request)
        else:
            await self._call_and_reply(transport, request)

    async def _call_and_reply(
        self, transport: ScriptTransport, request: p.CallRequest
    ) -> ToolResult:
        ts, started = time.time(), time.monotonic()
        try:
            result = await self._call_tool(request.tool, request.args)
        except anyio.get_cancelled_exc_class():
            self._failed += 1
            self._in_flight.discard(request.id)
            self._write_record(
                request,
                ts,
                time.monotonic() - started,
                p.ERROR_CANCELLED,
                "cancelled: the script ended or was stopped",
                is_error=True,
            )
            raise
        # A failed call is already its result: ToolManager.run_tool is the boundary, here as on
        # every call path (docs/architecture.md, "Where errors become results").
        duration = time.monotonic() - started
        text = result.text
        try:
            line = p.encode_ok_reply(request.id, result_payload(result, text))
        except (TypeError, ValueError) as error:
            result = ToolResult.from_error("unserializable_result", f"result is not JSON: {error}")
            line = p.encode_ok_reply(request.id, result_payload(result))
            text = result.text
        if len(line) > p.MAX_REPLY_BYTES:
            message = f"result of {len(line)} bytes is over the {p.MAX_REPLY_BYTES}-byte cap"
            result = ToolResult.from_error(p.ERROR_RESULT_TOO_LARGE, message)
            line = p.encode_ok_reply(request.id, result_payload(result))
            text = result.text
        if result.is_error:
            self._failed += 1
        code = result.error.code if result.error is not None else None
        self._write_record(request, ts, duration, code, text, is_error=result.is_error)
        self._in_flight.discard(request.id)
        self._changed()
        await self._reply(transport, line)
        return result


class _Countdown:
    """Counts tasks down to zero: each leaves :meth:`counting_down` once, and
    :meth:`reached_zero` waits for the last."""

    def __init__(self, count: int) -> None:
        self._left = count
        self._zero = anyio.Event()
        if count <= 0:
            self._zero.set()

    @contextmanager
    def counting_down(self) -> Iterator[None]:
        try:
            yield
        finally:
            self._left -= 1
            if self._left == 0:
                self._zero.set()

    async def reached_zero(self) -> None:
        await self._zero.wait()

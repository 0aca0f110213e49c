"""The console's live view of the gateway: every session's events, from the progress hub.

:class:`LiveRuns` watches the hub (:meth:`~sagents.progress._hub.ProgressHub.watch`): it keeps
the latest ``script.progress`` of recent runs, the ``tool_progress`` text of recent calls per
stream (bounded in all and per principal: one principal's runs cannot push out another's), and
passes every event to the console's open Server-Sent-Events streams, each
a bounded memory stream (an event that does not fit a slow page is dropped for it; the page
reloads what it shows from the records when a run ends). Open streams are counted per
principal (at most :data:`MAX_STREAMS_PER_PRINCIPAL`) and closed with the console session that
opened them (:meth:`LiveRuns.close_streams`). Each event is serialised once, as the SSE frame
every page receives (:attr:`LiveUpdate.frame`), and a run's output (``tool_progress``) goes only
to the pages that show that run's output, however many pages are open.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.core.events import Event, ScriptProgressEvent, ToolProgressEvent
from sagents.store._fair import FairMap

__all__ = ["LiveRun", "LiveRuns", "LiveUpdate", "TooManyStreams", "sse_frame"]

MAX_RUNS = 200  # runs kept in memory, oldest of the principal with the most dropped first
MAX_CALL_TEXT = 256 * 1024  # characters of tool_progress text kept per call and stream
MAX_CALLS = 200  # calls whose text is kept
MAX_PER_PRINCIPAL = 50  # of those runs and calls, kept for one principal (its oldest dropped)
SUBSCRIBER_BUFFER = 512  # events buffered for one open page
MAX_STREAMS_PER_PRINCIPAL = 16  # open pages (event streams) of one principal


class TooManyStreams(Exception):
    """A principal already has :data:`MAX_STREAMS_PER_PRINCIPAL` open event streams."""


@dataclass(frozen=True, eq=False)
class _Subscriber:
    send: MemoryObjectSendStream[LiveUpdate]
    key: str  # the console session that opened it
    principal: str
    output_of: str | None = None  # the call whose tool_progress output the page shows


def sse_frame(data: dict[str, Any]) -> bytes:
    """``data`` as one Server-Sent-Events ``data:`` frame (JSON, UTF-8)."""
    return f"data: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()


@dataclass(frozen=True, kw_only=True)
class LiveUpdate:
    """One event of one session, as a page receives it."""

    session_id: str
    event: dict[str, Any]
    frame: bytes
    """The event as the SSE frame a page sends: serialised once for every open page."""


@dataclass(kw_only=True)
class LiveRun:
    """What is known live of one run_script run."""

    script_id: str
    session_id: str
    tool_call_id: str | None
    description: str = ""
    progress: dict[str, Any] = field(default_factory=dict)
    first_seen: float = field(default_factory=time.time)


class LiveRuns:
    """Watches the hub for the console (a :class:`~sagents.progress._hub.HubWatcher`).

    Args:
        owner_of: The principal (credential identity) of a gateway session, whom its runs'
            memory is charged to.
    """

    def __init__(self, *, owner_of: Callable[[str], str] = lambda _session_id: "") -> None:
        self._owner_of = owner_of
        self.runs: FairMap[str, LiveRun] = _bounded(MAX_RUNS)
        self._text: FairMap[str, dict[str, str]] = _bounded(MAX_CALLS)
        self._descriptions: FairMap[str, str] = _bounded(MAX_RUNS)
        self._subscribers: list[_Subscriber] = []

    def note_start(self, session_id: str, tool_call_id: str | None, description: str) -> None:
        """A run_script call starts (its description, shown while it runs)."""
        if tool_call_id:
            self._descriptions.put(tool_call_id, description, self._owner_of(session_id))

    def offer(self, session_id: str, event: Event) -> None:
        """Take one event of ``session_id`` (called by the hub; never blocks)."""
        data = event.to_dict()
        if isinstance(event, ScriptProgressEvent):
            run = self.runs.get(event.script_id)
            if run is None:
                description = self._descriptions.get(event.tool_call_id or "") or ""
                run = LiveRun(
                    script_id=event.script_id,
                    session_id=session_id,
                    tool_call_id=event.tool_call_id,
                    description=description,
                )
                self.runs.put(event.script_id, run, self._owner_of(session_id))
            run.progress = data
            data = {**data, "description": run.description}
        elif isinstance(event, ToolProgressEvent) and event.text:
            streams = self._text.get(event.tool_call_id)
            if streams is None:
                streams = {}
                self._text.put(event.tool_call_id, streams, self._owner_of(session_id))
            kept = streams.get(event.stream, "") + event.text
            streams[event.stream] = kept[-MAX_CALL_TEXT:]
        self.broadcast(session_id, data)

    def broadcast(self, session_id: str, data: dict[str, Any]) -> None:
        """Pass one event object of ``session_id`` to every open page that shows it (never
        blocks): a ``tool_progress`` event only to the pages of its call's output."""
        output = data.get("tool_call_id") if data.get("type") == "tool_progress" else None
        pages = [s for s in self._subscribers if output is None or s.output_of == output]
        if not pages:
            return
        update = LiveUpdate(session_id=session_id, event=data, frame=sse_frame(data))
        for subscriber in pages:
            try:
                subscriber.send.send_nowait(update)
            except anyio.WouldBlock:
                pass  # this page is behind: progress is droppable, it reloads at the end
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

    def text_of(self, tool_call_id: str | None) -> dict[str, str]:
        """The kept ``tool_progress`` text of a call, by stream."""
        return dict(self._text.get(tool_call_id or "") or {})

    def run_of(self, script_id: str) -> LiveRun | None:
        """The live state of a run, if it is recent."""
        return self.runs.get(script_id)

    def streams_of(self, principal: str) -> int:
        """How many event streams ``principal`` has open."""
        return sum(s.principal == principal for s in self._subscribers)

    def close_streams(self, key: str) -> None:
        """End the streams opened under ``key`` (a console session that ended): their
        receivers see the end of the stream once they have read what was buffered."""
        for subscriber in [s for s in self._subscribers if s.key == key]:
            self._subscribers.remove(subscriber)
            subscriber.send.close()

    @asynccontextmanager
    async def subscribe(
        self, *, key: str = "", principal: str = "", output_of: str | None = None
    ) -> AsyncIterator[MemoryObjectReceiveStream[LiveUpdate]]:
        """Receive the updates while the block is open: every event but ``tool_progress``,
        and the ``tool_progress`` of the call ``output_of`` (a run's page shows its output).

        Args:
            key: The console session opening the stream (:meth:`close_streams` ends it).
            principal: Who opens it: at most :data:`MAX_STREAMS_PER_PRINCIPAL` each.
            output_of: The tool call id whose output the page shows, if any.

        Raises:
            TooManyStreams: ``principal`` has that many open already.
        """
        if self.streams_of(principal) >= MAX_STREAMS_PER_PRINCIPAL:
            raise TooManyStreams(
                f"{MAX_STREAMS_PER_PRINCIPAL} console pages are open with live updates already"
            )
        send, receive = anyio.create_memory_object_stream[LiveUpdate](SUBSCRIBER_BUFFER)
        subscriber = _Subscriber(send, key, principal, output_of)
        self._subscribers.append(subscriber)
        try:
            yield receive
        finally:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)
            send.close()
            receive.close()


def _bounded(limit: int) -> FairMap[str, Any]:
    return FairMap(limit=limit, per_owner=MAX_PER_PRINCIPAL)

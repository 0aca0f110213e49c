"""The console's live view of the gateway: every session's events, from the progress hub.

:class:`LiveRuns` watches the hub (:meth:`~sagents.progress._hub.ProgressHub.watch`): it keeps
the latest ``script.progress`` of recent runs, the ``tool_progress`` text of recent calls per
stream (bounded), and passes every event to the console's open Server-Sent-Events streams, each
a bounded memory stream (an event that does not fit a slow page is dropped for it; the page
reloads what it shows from the records when a run ends).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.core.events import Event, ScriptProgressEvent, ToolProgressEvent

__all__ = ["LiveRun", "LiveRuns", "LiveUpdate"]

MAX_RUNS = 200  # runs kept in memory, oldest dropped first
MAX_CALL_TEXT = 256 * 1024  # characters of tool_progress text kept per call and stream
MAX_CALLS = 200  # calls whose text is kept
SUBSCRIBER_BUFFER = 512  # events buffered for one open page


@dataclass(frozen=True, kw_only=True)
class LiveUpdate:
    """One event of one session, as a page receives it."""

    session_id: str
    event: dict[str, Any]


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
    """Watches the hub for the console (a :class:`~sagents.progress._hub.HubWatcher`)."""

    def __init__(self) -> None:
        self.runs: OrderedDict[str, LiveRun] = OrderedDict()
        self._text: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._descriptions: OrderedDict[str, str] = OrderedDict()
        self._subscribers: list[MemoryObjectSendStream[LiveUpdate]] = []

    def note_start(self, session_id: str, tool_call_id: str | None, description: str) -> None:
        """A run_script call starts (its description, shown while it runs)."""
        if tool_call_id:
            self._descriptions[tool_call_id] = description
            while len(self._descriptions) > MAX_RUNS:
                self._descriptions.popitem(last=False)

    def offer(self, session_id: str, event: Event) -> None:
        """Take one event of ``session_id`` (called by the hub; never blocks)."""
        data = event.to_dict()
        if isinstance(event, ScriptProgressEvent):
            run = self.runs.get(event.script_id)
            if run is None:
                description = self._descriptions.get(event.tool_call_id or "", "")
                run = LiveRun(
                    script_id=event.script_id,
                    session_id=session_id,
                    tool_call_id=event.tool_call_id,
                    description=description,
                )
                self.runs[event.script_id] = run
                while len(self.runs) > MAX_RUNS:
                    self.runs.popitem(last=False)
            run.progress = data
            data = {**data, "description": run.description}
        elif isinstance(event, ToolProgressEvent) and event.text:
            streams = self._text.get(event.tool_call_id)
            if streams is None:
                streams = self._text[event.tool_call_id] = {}
                while len(self._text) > MAX_CALLS:
                    self._text.popitem(last=False)
            kept = streams.get(event.stream, "") + event.text
            streams[event.stream] = kept[-MAX_CALL_TEXT:]
        self.broadcast(session_id, data)

    def broadcast(self, session_id: str, data: dict[str, Any]) -> None:
        """Pass one event object of ``session_id`` to every open page (never blocks)."""
        update = LiveUpdate(session_id=session_id, event=data)
        for send in list(self._subscribers):
            try:
                send.send_nowait(update)
            except anyio.WouldBlock:
                pass  # this page is behind: progress is droppable, it reloads at the end
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.remove(send)

    def text_of(self, tool_call_id: str | None) -> dict[str, str]:
        """The kept ``tool_progress`` text of a call, by stream."""
        return dict(self._text.get(tool_call_id or "", {}))

    def run_of(self, script_id: str) -> LiveRun | None:
        """The live state of a run, if it is recent."""
        return self.runs.get(script_id)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[LiveUpdate]]:
        """Receive every update while the block is open."""
        send, receive = anyio.create_memory_object_stream[LiveUpdate](SUBSCRIBER_BUFFER)
        self._subscribers.append(send)
        try:
            yield receive
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
            send.close()
            receive.close()

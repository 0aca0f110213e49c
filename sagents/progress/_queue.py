"""One consumer's bounded event queue, with the channel's overflow policy.

Why not a plain anyio memory object stream: a full stream either blocks the sender (a slow
consumer would block a tool) or refuses the item (``send_nowait`` raises ``WouldBlock``, and a
``closed`` event or an approval would be lost). The policy here needs to look at what is
queued, so :class:`EventQueue` is a small deque with an anyio wake-up event; senders never
wait.

Overflow policy (docs/progress.md, "Overflow policy"):

* **Droppable** events (``tool_progress`` text, running ``script.progress`` snapshots; see
  :func:`~sagents.core.events.is_droppable`) count against ``max_buffered``.
* A ``script.progress`` snapshot always replaces a waiting snapshot of the same script in place:
  the newer value supersedes it, so only the latest waits.
* When ``max_buffered`` droppable events wait, new ``tool_progress`` text is merged into the
  queue's last event if that is text of the same (tool_call_id, stream) and the merged text stays
  under :data:`MAX_MERGED_BYTES` (counted as *coalesced*); otherwise it is dropped and counted
  (``dropped_events``, ``dropped_bytes`` in UTF-8 bytes). A new script's first snapshot is
  dropped likewise (its final snapshot is never dropped).
* **Never-dropped** events (``closed``, final ``script.progress``, approvals, completions) are
  always queued, in order with the rest. They are rare (one or two per call), so this lane is
  unbounded in principle but capped at ``max_critical`` waiting events: a consumer that far
  behind is broken, so the queue is marked *lagged* and stops accepting; the consumer receives
  what was queued, then :class:`~sagents.errors.ConsumerLaggedError`. Nothing never-dropped is
  ever lost silently, and no sender ever blocks.

The queue is used from one event loop thread (the hub's); it is not thread-safe.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass
from typing import Final

import anyio

from sagents.core.events import Event, ScriptProgressEvent, ToolProgressEvent, is_droppable
from sagents.errors import ConsumerLaggedError
from sagents.progress._settings import DEFAULT_MAX_BUFFERED

__all__ = ["DEFAULT_MAX_CRITICAL", "MAX_MERGED_BYTES", "EventQueue", "QueueStats"]

# Never-dropped events that may wait in one queue before the consumer counts as lagged.
DEFAULT_MAX_CRITICAL: Final = 4096
# Largest text (UTF-8 bytes) a tool_progress event may grow to by merging under pressure.
MAX_MERGED_BYTES: Final = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class QueueStats:
    """What happened to the events offered to one queue.

    Attributes:
        queued: Events appended to the queue.
        delivered: Events the consumer received.
        coalesced: Events merged into (or replacing) one already waiting.
        dropped_events: Droppable events dropped under pressure or after close.
        dropped_bytes: UTF-8 bytes of ``tool_progress`` text in those dropped events.
    """

    queued: int = 0
    delivered: int = 0
    coalesced: int = 0
    dropped_events: int = 0
    dropped_bytes: int = 0


class EventQueue:
    """A consumer's queue: bounded for progress, never blocking a sender.

    Iterate it (``async for event in queue``) or call :meth:`receive`; the iteration ends after
    :meth:`close` once the waiting events have been received.

    Args:
        max_buffered: Droppable events that may wait before the overflow policy applies.
        max_critical: Never-dropped events that may wait before the consumer counts as lagged.

    Raises:
        ValueError: A bound is below 1.
    """

    def __init__(
        self,
        *,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        max_critical: int = DEFAULT_MAX_CRITICAL,
    ) -> None:
        if max_buffered < 1 or max_critical < 1:
            raise ValueError(
                f"queue bounds must be >= 1 (max_buffered={max_buffered!r}, "
                f"max_critical={max_critical!r})"
            )
        self._max_buffered = max_buffered
        self._max_critical = max_critical
        self._items: collections.deque[Event] = collections.deque()
        self._tail_bytes: int | None = None  # UTF-8 size of the tail's text once merged into
        self._droppable = 0
        self._critical = 0
        self._closed = False
        self._lagged = False
        self._ready: anyio.Event | None = None
        self._queued = self._delivered = self._coalesced = 0
        self._dropped_events = self._dropped_bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (waiting events can still be received)."""
        return self._closed

    @property
    def lagged(self) -> bool:
        """True once a never-dropped event could not be queued (see the module docstring)."""
        return self._lagged

    @property
    def stats(self) -> QueueStats:
        """Counters of queued, delivered, coalesced and dropped events."""
        return QueueStats(
            queued=self._queued,
            delivered=self._delivered,
            coalesced=self._coalesced,
            dropped_events=self._dropped_events,
            dropped_bytes=self._dropped_bytes,
        )

    def offer(self, event: Event) -> bool:
        """Queue ``event`` under the overflow policy; never blocks.

        Returns:
            True if the event was queued or merged into a waiting one, False if it was dropped
            (closed or lagged queue, or a droppable event under pressure).
        """
        droppable = is_droppable(event)
        if self._closed or self._lagged:
            if droppable:
                self._count_drop(event)
            return False
        if isinstance(event, ScriptProgressEvent) and self._replace_snapshot(event):
            return True
        if droppable:
            if self._droppable >= self._max_buffered:
                if isinstance(event, ToolProgressEvent) and self._merge_into_tail(event):
                    return True
                self._count_drop(event)
                return False
            self._droppable += 1
        else:
            if self._critical >= self._max_critical:
                self._lagged = True
                self._wake()
                return False
            self._critical += 1
        self._items.append(event)
        self._tail_bytes = None
        self._queued += 1
        self._wake()
        return True

    def receive_nowait(self) -> Event:
        """Return the oldest waiting event.

        Raises:
            anyio.WouldBlock: Nothing waits and the queue is open.
            anyio.EndOfStream: The queue is closed and empty.
            ConsumerLaggedError: The queue lagged and everything queued was received.
        """
        if self._items:
            event = self._items.popleft()
            if not self._items:
                self._tail_bytes = None
            if is_droppable(event):
                self._droppable -= 1
            else:
                self._critical -= 1
            self._delivered += 1
            return event
        if self._lagged:
            raise ConsumerLaggedError(
                f"the consumer fell more than {self._max_critical} never-dropped events behind",
                hint="read events faster, or subscribe again",
            )
        if self._closed:
            raise anyio.EndOfStream
        raise anyio.WouldBlock

    async def wait_ready(self) -> None:
        """Wait until :meth:`receive_nowait` would not raise ``WouldBlock``."""
        while not self._items and not self._closed and not self._lagged:
            if self._ready is None:
                self._ready = anyio.Event()
            await self._ready.wait()

    async def receive(self) -> Event:
        """Wait for and return the oldest event.

        Raises:
            anyio.EndOfStream: The queue is closed and empty.
            ConsumerLaggedError: The queue lagged and everything queued was received.
        """
        await self.wait_ready()
        return self.receive_nowait()

    def close(self) -> None:
        """Stop accepting events; the consumer still receives those waiting, then the end."""
        self._closed = True
        self._wake()

    def __aiter__(self) -> EventQueue:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def _wake(self) -> None:
        if self._ready is not None:
            self._ready.set()
            self._ready = None

    def _count_drop(self, event: Event) -> None:
        size = len(event.text.encode()) if isinstance(event, ToolProgressEvent) else 0
        self._dropped_events += 1
        self._dropped_bytes += size

    def _replace_snapshot(self, event: ScriptProgressEvent) -> bool:
        for index, waiting in enumerate(self._items):
            if (
                isinstance(waiting, ScriptProgressEvent)
                and waiting.script_id == event.script_id
                and not waiting.is_final
            ):
                if event.is_final:  # the slot changes lane: droppable -> never dropped
                    self._droppable -= 1
                    self._critical += 1
                self._items[index] = event
                self._coalesced += 1
                return True
        return False

    def _merge_into_tail(self, event: ToolProgressEvent) -> bool:
        if not self._items:
            return False
        tail = self._items[-1]
        if not (
            isinstance(tail, ToolProgressEvent)
            and not tail.closed
            and tail.tool_call_id == event.tool_call_id
            and tail.stream == event.stream
        ):
            return False
        if self._tail_bytes is None:
            self._tail_bytes = len(tail.text.encode())
        size = self._tail_bytes + len(event.text.encode())
        if size > MAX_MERGED_BYTES:
            return False
        self._items[-1] = dataclasses.replace(tail, text=tail.text + event.text, ts=event.ts)
        self._tail_bytes = size
        self._coalesced += 1
        return True

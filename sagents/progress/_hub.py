"""The event hub: routes events by session to every registered consumer queue.

A :class:`ProgressHub` is owned by whoever builds sessions (the ToolManager's owner, the
gateway). :func:`default_hub` is the process default used by the module-level
functions :func:`register_progress_queue` / :func:`unregister_progress_queue` and by
:func:`subscribe`; it is the only module state here.

Fan-out: each consumer of a session registers its own :class:`~sagents.progress.EventQueue`;
a second consumer for the same session gets its own queue and never replaces the first. Every
event published for the session is offered to every one of its queues, under each queue's
overflow policy (see :mod:`sagents.progress._queue`). Publishing never blocks.

The hub is used from one event loop thread; sync tools in worker threads reach it through
``anyio.from_thread.run``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Protocol

from sagents.core.events import Event, ToolProgressEvent
from sagents.progress._clock import Clock, SystemClock
from sagents.progress._queue import EventQueue
from sagents.progress._settings import ProgressSettings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sagents.progress._binding import ToolCallBinding

__all__ = [
    "HubWatcher",
    "ProgressHub",
    "default_hub",
    "register_progress_queue",
    "subscribe",
    "unregister_progress_queue",
]

_log = logging.getLogger(__name__)


class HubWatcher(Protocol):
    """Sees every session's events (an operator's view, such as the web console).

    ``offer`` is called synchronously by :meth:`ProgressHub.publish`; it must not block (put
    the event on a bounded stream, drop it when the stream is full).
    """

    def offer(self, session_id: str, event: Event) -> None:
        """Take one event published for ``session_id``."""
        ...


class ProgressHub:
    """Routes events of each session to that session's consumer queues.

    Args:
        settings: The channel's tunables; read from the environment when None
            (:meth:`ProgressSettings.from_env`).
        clock: The clock for coalescing windows and ``ts``; the system clock when None.
        environ: The environment to read settings from when ``settings`` is None.
    """

    def __init__(
        self,
        *,
        settings: ProgressSettings | None = None,
        clock: Clock | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._settings = settings if settings is not None else ProgressSettings.from_env(environ)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._queues: dict[str, list[EventQueue]] = {}
        # the session each registered queue is registered for: a registration checks the queue
        # is not already registered in one lookup, not by looking at every session's queues
        # (bench/bench_progress.py: with 500 sessions listening it took 50 x the time of one alone)
        self._session_of: dict[EventQueue, str] = {}
        self._bindings: dict[str, list[ToolCallBinding]] = {}
        self._watchers: list[HubWatcher] = []

    def watch(self, watcher: HubWatcher) -> None:
        """Show ``watcher`` every event published from now on, of every session (see
        :class:`HubWatcher`). A watcher does not make a session :meth:`listening`: it sees what
        is published anyway (``script.progress``, approvals, completions, what
        :meth:`show_watchers` sends, and ``tool_progress`` of calls someone listens to),
        so that watching costs the calls nothing."""
        self._watchers.append(watcher)

    def show_watchers(self, session_id: str, event: Event) -> None:
        """Offer ``event`` to the watchers only, not to the session's consumers (what only an
        operator's view shows: a run_script run's raw stdout and stderr)."""
        for watcher in self._watchers:
            watcher.offer(session_id, event)

    def unwatch(self, watcher: HubWatcher) -> None:
        """Stop showing events to ``watcher`` (unknown watchers are ignored)."""
        self._watchers = [w for w in self._watchers if w is not watcher]

    @property
    def settings(self) -> ProgressSettings:
        """The settings this hub was created with."""
        return self._settings

    @property
    def clock(self) -> Clock:
        """The hub's clock."""
        return self._clock

    def queues(self, session_id: str) -> tuple[EventQueue, ...]:
        """The queues registered for ``session_id``, oldest first."""
        return tuple(self._queues.get(session_id, ()))

    def listening(self, session_id: str) -> bool:
        """True when at least one consumer's queue is registered for ``session_id`` (watchers
        do not count: a call nobody else listens to stays quiet, see :meth:`watch`)."""
        return session_id in self._queues

    def register_progress_queue(self, session_id: str, queue: EventQueue) -> None:
        """Register a consumer's queue for a session (docs/progress.md).

        Args:
            session_id: The session whose events the queue receives.
            queue: The consumer's own queue; other queues of the session stay registered.

        Raises:
            ValueError: The queue is closed, or already registered (for any session).
        """
        if queue.closed:
            raise ValueError(f"cannot register a closed queue for session {session_id!r}")
        other = self._session_of.get(queue)
        if other is not None:
            raise ValueError(f"this queue is already registered for session {other!r}")
        self._session_of[queue] = session_id
        self._queues.setdefault(session_id, []).append(queue)

    def unregister_progress_queue(self, session_id: str, queue: EventQueue | None = None) -> None:
        """Unregister a consumer: flush pending progress to it, then close its queue.

        Text waiting in a coalescing window of the session's running tool calls is flushed
        first (delivered, not dropped), so the departing consumer receives it before the end
        of its queue. Unknown sessions and queues are ignored (unregistering is idempotent).

        Args:
            session_id: The session.
            queue: The queue to remove; None removes every queue of the session (the seed
                design's one-consumer form).
        """
        registered = self._queues.get(session_id)
        if not registered:
            return
        if queue is not None and not any(q is queue for q in registered):
            return
        for binding in list(self._bindings.get(session_id, ())):
            binding.flush()
        leaving = list(registered) if queue is None else [queue]
        remaining = [q for q in registered if all(q is not gone for gone in leaving)]
        if remaining:
            self._queues[session_id] = remaining
        else:
            del self._queues[session_id]
        for gone in leaving:
            del self._session_of[gone]
            gone.close()

    @asynccontextmanager
    async def subscribe(
        self, session_id: str, *, max_buffered: int | None = None
    ) -> AsyncIterator[EventQueue]:
        """Register a new queue for the session for the duration of the block.

        ``async with hub.subscribe("s1") as events: async for event in events: ...``. On exit,
        pending progress is flushed into the queue and it is unregistered and closed.

        Args:
            session_id: The session.
            max_buffered: The queue's bound for droppable events; the hub's setting when None.

        Yields:
            The registered :class:`EventQueue`.
        """
        queue = EventQueue(
            max_buffered=max_buffered if max_buffered is not None else self._settings.max_buffered
        )
        self.register_progress_queue(session_id, queue)
        try:
            yield queue
        finally:
            self.unregister_progress_queue(session_id, queue)

    def publish(self, session_id: str, event: Event) -> None:
        """Offer ``event`` to every queue of the session; never blocks.

        ``tool_progress`` is discarded when progress is disabled; other kinds always go out.
        A queue that lags (see :mod:`sagents.progress._queue`) is unregistered, with a warning.
        """
        if isinstance(event, ToolProgressEvent) and not self._settings.enabled:
            return
        for watcher in self._watchers:
            watcher.offer(session_id, event)
        queues = self._queues.get(session_id)
        if not queues:
            return
        lagging: list[EventQueue] = []
        for queue in queues:
            queue.offer(event)
            if queue.lagged:
                lagging.append(queue)
        for queue in lagging:
            _log.warning("progress consumer of session %r lagged; unregistered it", session_id)
            self.unregister_progress_queue(session_id, queue)

    def attach(self, binding: ToolCallBinding) -> None:
        """Track a running tool call's binding so that unregistering flushes its text."""
        self._bindings.setdefault(binding.session_id, []).append(binding)

    def detach(self, binding: ToolCallBinding) -> None:
        """Stop tracking a binding (its tool call has ended)."""
        bindings = self._bindings.get(binding.session_id, [])
        self._bindings[binding.session_id] = [b for b in bindings if b is not binding]
        if not self._bindings[binding.session_id]:
            del self._bindings[binding.session_id]


_default: Final[list[ProgressHub]] = []


def default_hub() -> ProgressHub:
    """Return the process-default hub, created (with settings from the environment) on first use."""
    if not _default:
        _default.append(ProgressHub())
    return _default[0]


def register_progress_queue(session_id: str, queue: EventQueue) -> None:
    """Register ``queue`` on the process-default hub (docs/progress.md).

    See :meth:`ProgressHub.register_progress_queue`.
    """
    default_hub().register_progress_queue(session_id, queue)


def unregister_progress_queue(session_id: str, queue: EventQueue | None = None) -> None:
    """Unregister from the process-default hub, flushing pending text first (docs/progress.md).

    See :meth:`ProgressHub.unregister_progress_queue`.
    """
    default_hub().unregister_progress_queue(session_id, queue)


@asynccontextmanager
async def subscribe(
    session_id: str, *, max_buffered: int | None = None
) -> AsyncIterator[EventQueue]:
    """Subscribe to a session's events on the process-default hub.

    See :meth:`ProgressHub.subscribe`.
    """
    async with default_hub().subscribe(session_id, max_buffered=max_buffered) as queue:
        yield queue

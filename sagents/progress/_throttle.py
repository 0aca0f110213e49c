"""Throttle for ``script.progress``: at most one snapshot per interval, the last always delivered.

``script.progress`` events are pushed at most once per second, and the last value is
always delivered (trailing edge). A snapshot that comes while the interval since the previous
one is still running waits, replacing any older waiting one, and goes out when the interval
ends. A final snapshot (``status`` not ``running``) goes out at once and ends the throttle;
leaving the ``async with`` block delivers a waiting snapshot at once.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from sagents.core._lifespan import Lifespan
from sagents.core.events import ScriptProgressEvent
from sagents.progress._clock import Clock, SystemClock
from sagents.progress._scope import run_beside

__all__ = ["ScriptProgressThrottle"]


class ScriptProgressThrottle(Lifespan):
    """Rate-limit ``script.progress`` snapshots of one run.

    ``async with ScriptProgressThrottle(send) as throttle: throttle.update(snapshot)``

    Args:
        send: Called with each snapshot to deliver, e.g.
            ``functools.partial(hub.publish, session_id)``; must not block.
        clock: Time source; the system clock when None.
        interval_s: Minimum seconds between two running snapshots (> 0).
        task_group: Where the timer of the trailing snapshot runs while the throttle is
            entered (an owner's that outlives it: a run opens no task group for its
            progress); a task group of its own when None.

    Raises:
        ValueError: ``interval_s`` is not positive.
    """

    def __init__(
        self,
        send: Callable[[ScriptProgressEvent], object],
        *,
        clock: Clock | None = None,
        interval_s: float = 1.0,
        task_group: anyio.abc.TaskGroup | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, not {interval_s!r}")
        self._send = send
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._interval = interval_s
        self._last_sent = -math.inf
        self._pending: ScriptProgressEvent | None = None
        self._finished = False
        self._wake: anyio.Event | None = None
        self._task_group = task_group

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        self._wake = anyio.Event()
        try:
            if self._task_group is None:
                # The body's own error propagates unchanged (not grouped with the timer's).
                async with run_beside(self._run_timer):
                    yield
            else:
                timer = anyio.CancelScope()
                self._task_group.start_soon(self._run_timer_in, timer)
                try:
                    yield
                finally:
                    timer.cancel()
        finally:
            self._deliver_pending()  # last on leaving: the final value goes out

    @property
    def pending(self) -> ScriptProgressEvent | None:
        """The snapshot waiting for the interval to end, if any."""
        return self._pending

    def update(self, snapshot: ScriptProgressEvent) -> None:
        """Offer a new snapshot; never blocks.

        Ignored after a final snapshot was delivered.
        """
        if self._finished:
            return
        if snapshot.is_final:
            self._pending = None
            self._finished = True
            self._deliver(snapshot)
            return
        if self._clock.monotonic() - self._last_sent >= self._interval and self._pending is None:
            self._deliver(snapshot)
            return
        self._pending = snapshot
        if self._wake is not None:
            self._wake.set()

    def _deliver(self, snapshot: ScriptProgressEvent) -> None:
        self._last_sent = self._clock.monotonic()
        self._send(snapshot)

    def _deliver_pending(self) -> None:
        if self._pending is not None:
            snapshot, self._pending = self._pending, None
            self._deliver(snapshot)

    async def _run_timer_in(self, scope: anyio.CancelScope) -> None:
        with scope:
            await self._run_timer()

    async def _run_timer(self) -> None:
        while True:
            assert self._wake is not None
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._pending is not None:
                deadline = self._last_sent + self._interval
                await self._clock.sleep_until(deadline)
                if self._clock.monotonic() >= self._last_sent + self._interval:
                    self._deliver_pending()

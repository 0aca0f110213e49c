"""Clocks for the progress channel: the system clock, and a manual one for tests.

Coalescing windows and the ``script.progress`` throttle read time and wait for deadlines only
through a :class:`Clock`, so tests drive them with :class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import anyio
import anyio.lowlevel

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What the channel needs from a clock."""

    def monotonic(self) -> float:
        """Seconds on a monotonic scale (only differences matter)."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the Unix epoch (the events' ``ts``)."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return once :meth:`monotonic` has reached ``deadline`` (seconds)."""
        ...


class SystemClock:
    """The real clock: :func:`time.monotonic`, :func:`time.time` and :func:`anyio.sleep`."""

    def monotonic(self) -> float:
        """Return :func:`time.monotonic`."""
        return time.monotonic()

    def time(self) -> float:
        """Return :func:`time.time`."""
        return time.time()

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until ``deadline`` on the monotonic scale (returns at once if it has passed)."""
        await anyio.sleep(max(0.0, deadline - time.monotonic()))


class ManualClock:
    """A clock that moves only when :meth:`advance` is called; for tests.

    Args:
        start: The initial monotonic reading, seconds.
        wall_start: The wall-clock reading at ``start``, seconds since the Unix epoch.
    """

    def __init__(self, *, start: float = 0.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._sleepers: list[tuple[float, anyio.Event]] = []

    def monotonic(self) -> float:
        """Return the current manual reading."""
        return self._now

    def time(self) -> float:
        """Return the wall-clock reading that corresponds to :meth:`monotonic`."""
        return self._now + self._wall_offset

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting in :meth:`sleep_until`."""
        return len(self._sleepers)

    def advance(self, seconds: float) -> None:
        """Move the clock forward and wake every sleeper whose deadline has passed.

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError(f"a clock cannot go back (advance by {seconds!r} s)")
        self._now += seconds
        for deadline, event in list(self._sleepers):
            if deadline <= self._now:
                event.set()

    async def sleep_until(self, deadline: float) -> None:
        """Wait until :meth:`advance` has moved the clock to ``deadline`` or beyond."""
        if deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        entry = (deadline, anyio.Event())
        self._sleepers.append(entry)
        try:
            await entry[1].wait()
        finally:
            self._sleepers.remove(entry)

"""Following a background task's output: byte-offset reads, and a tail-comparing fallback.

``execute_shell_command`` streams a task's log to the live progress channel while it waits.
With :meth:`~sagents.sandbox.Sandbox.read_background_output_range` (every provider of the
protocol) the follower keeps a byte offset: each read starts where the last one ended, so there
is no duplicate and no loss, and the sandbox never splits a UTF-8 character (docs/builtin_tools.md,
"Following output without duplicate, loss or broken characters").

A provider that can only return the *last* bytes of a log (:class:`TailReader`) is followed by
comparing tails: the new text is what follows the longest suffix of the previous
tail that is also a prefix of the new tail (:func:`tail_delta`). Repetitive output makes that
overlap ambiguous; when the provider also reports how many bytes the log grew, the overlap that
accounts for exactly that growth is chosen.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = [
    "DEFAULT_READ_CHUNK_BYTES",
    "OutputFollower",
    "RangeReader",
    "TailReader",
    "tail_delta",
]

DEFAULT_READ_CHUNK_BYTES = 256 * 1024
"""Bytes asked for per range read: large enough for few reads, small enough to bound memory."""

_GAP_MARKER = "\n[... output skipped: it grew by more than one tail between two reads ...]\n"


@runtime_checkable
class RangeReader(Protocol):
    """A provider with byte-offset reads (the :class:`~sagents.sandbox.Sandbox` protocol)."""

    async def read_background_output_range(
        self, task_id: str, offset: int, max_bytes: int
    ) -> tuple[str, int]:
        """Return ``(text, new_offset)`` from byte ``offset`` (see the Sandbox protocol)."""
        ...


@runtime_checkable
class TailReader(Protocol):
    """A provider that can only return the end of a task's log (a fallback shape)."""

    async def read_background_output_tail(self, task_id: str, max_bytes: int) -> tuple[str, int]:
        """Return ``(text, total_bytes)``: about the last ``max_bytes`` bytes of the log, as
        text, and the log's total size in bytes."""
        ...


def _prefix_function(pattern: str) -> list[int]:
    """KMP failure table: ``pi[i]`` is the longest proper border of ``pattern[: i + 1]``."""
    pi = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = pi[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        pi[i] = k
    return pi


def tail_delta(previous: str, current: str, *, grown_bytes: int | None = None) -> str:
    """The text that ``current`` (a newer tail of a log) adds after ``previous`` (an older tail).

    The overlap is a suffix of ``previous`` that is a prefix of ``current``; the text after it
    is new. Among the candidate overlaps (the longest one and its borders, found with the KMP
    failure table in O(len(previous) + len(current))), the longest is taken, unless
    ``grown_bytes`` is given and a shorter one accounts for exactly that many new UTF-8 bytes
    (periodic output such as ``"abab"``). When no overlap exists the log grew by more than a
    tail between the two reads: all of ``current`` is new, after a marker saying text was
    skipped.

    Args:
        previous: The tail read last time ("" before the first read).
        current: The tail read now.
        grown_bytes: How many bytes the log grew between the two reads, if the provider says.

    Returns:
        The new text (may be empty).
    """
    if not previous:
        return current
    if not current:
        return ""
    if grown_bytes is not None and grown_bytes > len(current.encode()):
        return _GAP_MARKER + current
    pi = _prefix_function(current)
    state = 0
    for char in previous:
        while state and (state == len(current) or char != current[state]):
            state = pi[state - 1]
        if char == current[state]:
            state += 1
    if state == 0:
        if grown_bytes == len(current.encode()):
            return current
        return _GAP_MARKER + current
    if grown_bytes is not None:
        candidate = state
        while candidate:
            delta = current[candidate:]
            if len(delta.encode()) == grown_bytes:
                return delta
            candidate = pi[candidate - 1]
        if grown_bytes == len(current.encode()):
            return current
    return current[state:]


class OutputFollower:
    """Reads a task's log incrementally: each :meth:`read_new` returns only unseen text.

    Uses byte-offset reads when the provider has them (exact), else compares tails
    (:func:`tail_delta`).

    Args:
        source: The sandbox (or any :class:`RangeReader` / :class:`TailReader`).
        task_id: The task to follow.
        chunk_bytes: Bytes per read (>= 1).
        offset: Byte offset to resume from (range reads only).

    Raises:
        TypeError: when ``source`` has neither kind of read.
        ValueError: for ``chunk_bytes < 1`` or a negative ``offset``.
    """

    def __init__(
        self,
        source: object,
        task_id: str,
        *,
        chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES,
        offset: int = 0,
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes!r}")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset!r}")
        if not isinstance(source, RangeReader | TailReader):
            raise TypeError(
                f"{type(source).__name__} has neither read_background_output_range nor "
                "read_background_output_tail"
            )
        self._source = source
        self._task_id = task_id
        self._chunk = chunk_bytes
        self.offset = offset
        """Bytes consumed so far (range reads), or the log size at the last read (tails)."""
        self._last_tail = ""

    @property
    def uses_ranges(self) -> bool:
        """True when the follower reads by byte offset (no duplicate or loss possible)."""
        return isinstance(self._source, RangeReader)

    async def read_new(self) -> str:
        """Return the next piece of unseen text ("" when nothing new is there yet).

        With range reads, at most about ``chunk_bytes`` bytes per call: call again until it
        returns "" to drain the log.
        """
        if isinstance(self._source, RangeReader):
            text, self.offset = await self._source.read_background_output_range(
                self._task_id, self.offset, self._chunk
            )
            return text
        tail, total = await self._source.read_background_output_tail(self._task_id, self._chunk)
        grown = total - self.offset
        delta = "" if grown <= 0 else tail_delta(self._last_tail, tail, grown_bytes=grown)
        self._last_tail = tail
        self.offset = total
        return delta

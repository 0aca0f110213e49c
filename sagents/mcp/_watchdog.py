"""The stdio servers' watchdog: ends their process groups when the process that started them dies.

A stdio server gets EOF on its stdin when our process dies, but nothing makes it (or the
grandchild of an ``npx``/``uvx`` wrapper) exit; after ``SIGKILL`` no ``atexit`` hook and no
``finally`` runs. So the first stdio server starts this watchdog: a small stdlib-only process in a
session of its own that reads ``+PGID`` / ``-PGID`` lines on its stdin (the process groups of the
servers running now). When that pipe reaches EOF, which the kernel delivers however our process
ended, it sends ``SIGTERM`` to every group still listed, waits :data:`TERM_GRACE` seconds and
sends ``SIGKILL`` to those still alive, then exits.

Run as a script (``python -I -S watchdog.py``): it imports nothing of sagents, to start fast.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

__all__ = ["TERM_GRACE", "group_alive", "main"]

TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL to the orphaned process groups
_POLL = 0.02  # seconds between checks whether the groups are gone


def group_alive(pgid: int) -> bool:
    """True while process group ``pgid`` has a member (or one we may not signal)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_all(groups: set[int], signum: int) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)


def _apply(line: bytes, groups: set[int]) -> None:
    op, _, number = line.strip().partition(b" ")
    if not number.isdigit():
        return
    if op == b"+":
        groups.add(int(number))
    elif op == b"-":
        groups.discard(int(number))


def main() -> None:
    """Track process groups from stdin until EOF, then end the ones still listed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for our parent
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only EOF (our parent's end) ends us
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            data = os.read(0, 4096)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
        except OSError:
            break
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            _apply(line, groups)
    groups = {pgid for pgid in groups if group_alive(pgid)}
    _signal_all(groups, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE
    while groups and time.monotonic() < deadline:
        time.sleep(_POLL)
        groups = {pgid for pgid in groups if group_alive(pgid)}
    _signal_all(groups, signal.SIGKILL)


if __name__ == "__main__":
    main()

"""Rich, imported only when something is drawn: every ``--help`` and usage error is in click's
plain layout, and loading Rich (with markdown-it and Pygments behind it) would cost more than the
rest of a ``--help``.

A console whose stream is not a terminal (a pipe, a log file) does not wrap text: Rich would
break every line at 80 columns, mid-sentence, and a log reader or ``grep`` would see halves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["stderr_console", "stdout_console"]


def stderr_console() -> Console:
    """A Rich console on stderr (lines unwrapped when stderr is not a terminal)."""
    return _console(stderr=True)


def stdout_console() -> Console:
    """A Rich console on stdout (lines unwrapped when stdout is not a terminal)."""
    return _console(stderr=False)


def _console(*, stderr: bool) -> Console:
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal:
        console.soft_wrap = True
    return console

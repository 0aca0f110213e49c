"""The terminal approver of the command line (``sagents chat``, ``sagents run-script``).

It answers the one approval protocol (:mod:`sagents.tool._approval`): a tool call waiting for
the user, or the one approval before a run_script run. What it shows is the model's text,
printed literally (no Rich markup, control characters escaped, :mod:`sagents.core._literal`) and
whole: every line wrapped at the terminal's width, never cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread

from sagents.cli._rich import stderr_console
from sagents.core._literal import literal_text, printable
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["TerminalApprover"]

_KEYS: Final[dict[ApprovalAnswer, str]] = {
    "allow_once": "o",
    "allow_session": "s",
    "deny": "d",
}
_NAMES: Final[dict[ApprovalAnswer, str]] = {
    "allow_once": "allow once",
    "allow_session": "allow session",
    "deny": "deny",
}
_ALSO_ALLOW_ONCE = frozenset({"a", "allow"})  # the short answers run-script's prompt took


def _read_line(prompt: str) -> str:
    return input(prompt)


@dataclass(kw_only=True)
class TerminalApprover:
    """Asks on the terminal, one request at a time, showing what will run whole.

    The prompt lists the answers the request offers (``allow once [o] / deny [d]`` for a
    script or a destructive tool); ``a`` and ``allow`` also mean "allow once".

    Attributes:
        console: Where the request is shown (stderr, so that ``--json`` stdout stays clean).
        ask: Reads one answer line (``input`` by default; replaced in tests). End of input, or
            an answer that is not offered, denies.
        caller: Who makes a direct call, for its heading ("The model wants to call ...");
            None for a person who typed the call (``sagents call``): "Call ... with:".
    """

    console: Console = field(default_factory=stderr_console)
    ask: Callable[[str], str] = _read_line
    caller: str | None = "The model"
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Show the request and read the answer in a worker thread."""
        async with self._lock:
            self.show(request)
            choices = " / ".join(f"{_NAMES[a]} [{_KEYS[a]}]" for a in request.offered)
            try:
                line = await anyio.to_thread.run_sync(
                    self.ask, f"{choices}: ", abandon_on_cancel=True
                )
            except EOFError:
                return "deny"
            answer = line.strip().lower()
            for offered in request.offered:
                if answer in (_KEYS[offered], _NAMES[offered], offered):
                    return offered
            if answer in _ALSO_ALLOW_ONCE and "allow_once" in request.offered:
                return "allow_once"
            return "deny"

    def show(self, request: ApprovalRequest) -> None:
        """Print the request: the tools with their classes, then the literal text, every line
        whole (a script with line numbers, wrapped at the terminal's width)."""
        tools = ", ".join(f"{n} ({request.permissions.get(n, '?')})" for n in request.tools)
        if request.kind == "script":
            self.console.print(
                literal_text(f"run_script wants to call the write tools {tools}", style="bold"),
                overflow="fold",
            )
            description = request.view().description  # one literal line: it draws nothing
            if description:
                self.console.print(
                    literal_text(f"description (the model's words, one line): {description}"),
                    overflow="fold",
                )
            script = printable(request.script or "")
            from rich.syntax import Syntax

            self.console.print(Syntax(script, "python", line_numbers=True, word_wrap=True))
            return
        heading = f"{self.caller} wants to call" if self.caller else "Call"
        self.console.print(literal_text(f"{heading} {tools} with:", style="bold"), overflow="fold")
        self.console.print(literal_text(request.shown_text()), overflow="fold", soft_wrap=False)

    def denial_reason(self, request: ApprovalRequest) -> str:
        """The user was asked at the terminal and did not allow."""
        what = (
            f"the write tools {', '.join(request.tools)}"
            if request.kind == "script"
            else f"the call of {', '.join(request.tools)}"
        )
        return f"the user denied {what} at the terminal prompt"

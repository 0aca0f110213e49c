"""The permission mode of ``sagents call``: which calls run, which are asked, which are refused.

The rules are the gateway's (docs/gateway.md, "Modes and approvals"): ``read_only`` tools always
run; in ``auto`` mode write and destructive tools run without asking; in ``ask`` mode (the
default) a person approves each write or destructive call at a terminal prompt, and without a
terminal the call is refused, naming the reason; in ``read_only`` mode only ``read_only`` tools
run. A refusal is an error result (``not_allowed`` or ``approval_denied``), printed like any
result, so ``--json`` keeps one shape.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
from rich.console import Console

from sagents.core.literal import literal_text
from sagents.core.permissions import PermissionMode
from sagents.core.result import ToolResult
from sagents.core.spec import ToolSpec
from sagents.errors import ApprovalDeniedError, NotAllowedError

__all__ = ["ALLOW_ANSWERS", "approve_call", "read_answer"]

ALLOW_ANSWERS = frozenset({"y", "yes", "a", "allow"})
"""Answers to the prompt that allow the call; anything else (or end of input) denies it."""


def read_answer(prompt: str) -> str:
    """Show ``prompt`` on stderr and read one line from stdin (``input()`` would write the
    prompt to stdout, which belongs to the result).

    Raises:
        EOFError: at the end of input (the caller then denies).
    """
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _refusal(error: NotAllowedError | ApprovalDeniedError) -> ToolResult:
    return ToolResult.from_exception(error)


async def approve_call(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    mode: PermissionMode,
    *,
    interactive: bool,
    ask: Callable[[str], str],
    console: Console | None = None,
) -> ToolResult | None:
    """Decide whether one ``sagents call`` may run.

    Args:
        spec: The tool to call.
        arguments: Its arguments (shown whole in the prompt).
        mode: The ``--mode`` given.
        interactive: stdin and stderr are a terminal (a person can answer).
        ask: Shows a prompt and reads one answer line; raises ``EOFError`` at end of input.
        console: Where the request is shown (stderr by default).

    Returns:
        None when the call may run; otherwise the error result to print instead of running it.
    """
    if spec.permission == "read_only" or mode == "auto":
        return None
    what = f"{spec.permission} tool {spec.name!r}"
    details = {"tool": spec.name, "permission": spec.permission, "mode": mode}
    if mode == "read_only":
        return _refusal(
            NotAllowedError(
                f"the {what} was not called: --mode read_only runs only read_only tools",
                hint="use --mode ask (asks first) or --mode auto to call it",
                details=details,
            )
        )
    if not interactive:
        return _refusal(
            NotAllowedError(
                f"the {what} was not called: --mode ask needs a terminal to ask for approval, "
                "and nobody was asked (stdin or stderr is not a terminal)",
                hint="run it on a terminal to be asked, or pass --mode auto to call it unasked",
                details=details,
            )
        )
    screen = console or Console(stderr=True)
    heading = literal_text(f"sagents call: the {what} wants to run", style="bold")
    screen.print(heading)
    if spec.summary:
        screen.print(literal_text(f"description: {spec.summary}"))
    screen.print(literal_text("arguments:"))
    screen.print(literal_text(json.dumps(dict(arguments), indent=2, ensure_ascii=False)))
    try:
        answer = await anyio.to_thread.run_sync(ask, "allow this call? [y/N]: ")
    except EOFError:
        answer = ""
    if answer.strip().lower() in ALLOW_ANSWERS:
        return None
    return _refusal(
        ApprovalDeniedError(
            f"the {what} was not called: denied at the terminal prompt",
            hint="answer 'y' to allow it, or pass --mode auto to call it unasked",
            details=details,
        )
    )

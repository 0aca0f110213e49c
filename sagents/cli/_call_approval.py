"""The permission mode of ``sagents call``: which calls run, which are asked, which are refused.

The rule is the one every caller applies (:func:`sagents.tool._approval.approval_needed`, the
rule of the library's ``ToolProxy`` and of the gateway; docs/tools.md, "Permission modes and
approvals"): ``read_only`` tools always run; in ``read_only`` mode nothing else does; in
``auto`` mode write tools run unasked; in ``ask`` mode (the default) a write tool is asked
about; a destructive tool is asked about in every mode. The one asking is the command line's
:class:`~sagents.cli.terminal_approval.TerminalApprover`; without a terminal nobody can be
asked, and the call is refused, naming the flag that allows it (``--mode auto`` for a write
tool, ``--yes`` for any). A refusal is an error result (``not_allowed`` or
``approval_denied``), printed like any result, so ``--json`` keeps one shape.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from sagents.core._permissions import PermissionMode
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import ApprovalDeniedError, NotAllowedError
from sagents.tool._approval import Approver, approval_needed, settle_answer

__all__ = ["approve_call", "read_answer"]

_SESSION = "sagents-call"  # one call, one session: nothing is remembered between calls


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


async def approve_call(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    mode: PermissionMode,
    *,
    approver: Approver | None,
    yes: bool = False,
) -> ToolResult | None:
    """Decide whether one ``sagents call`` may run.

    Args:
        spec: The tool to call.
        arguments: Its arguments (shown whole in the request).
        mode: The ``--mode`` given.
        approver: Who is asked (the terminal prompt); None when nobody can be asked (stdin or
            stderr is not a terminal).
        yes: ``--yes``: a call that would be asked about runs unasked.

    Returns:
        None when the call may run; otherwise the error result to print instead of running it.
    """
    what = f"{spec.permission} tool {spec.name!r}"
    details = {"tool": spec.name, "permission": spec.permission, "mode": mode}
    try:
        request = approval_needed(spec, arguments, mode=mode, session_id=_SESSION)
    except NotAllowedError as refused:
        if mode != "read_only":
            hint = "change the tool's permission class in the configuration to call it"
        elif spec.permission == "destructive":  # asked before in every mode
            hint = "use --mode ask or --mode auto (asks first; add --yes to call it unasked)"
        else:
            hint = "use --mode ask (asks first) or --mode auto to call it"
        return ToolResult.from_exception(
            NotAllowedError(f"the {what} was not called: {refused.message}", hint=hint,
                            details=details)
        )  # fmt: skip
    if request is None or yes:
        return None
    flags = "--yes" if spec.permission == "destructive" else "--mode auto or --yes"
    if approver is None:
        return ToolResult.from_exception(
            NotAllowedError(
                f"the {what} was not called: it needs an approval in {mode!r} mode, and nobody "
                "was asked (stdin or stderr is not a terminal)",
                hint=f"run it on a terminal to be asked, or pass {flags} to call it unasked",
                details=details,
            )
        )
    # one call: "allow for this session" would have nothing to remember
    request = dataclasses.replace(request, offered=("allow_once", "deny"))
    if settle_answer(request, await approver.approve(request)) != "deny":
        return None
    return ToolResult.from_exception(
        ApprovalDeniedError(
            f"the {what} was not called: denied at the terminal prompt",
            hint=f"answer 'allow once' to run it, or pass {flags} to call it unasked",
            details=details,
        )
    )

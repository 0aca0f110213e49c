"""Which tools a script may call, the pre-run check, and approval
(docs/run_script.md, "Permissions").

=====================  ==============================================================
permission class       in a script
=====================  ==============================================================
``read_only``          callable, listed or not
``write``              callable only when listed in ``tools``; in ``ask`` mode one
                       approval before the run covers every listed write tool (tools
                       the user already allowed for the session are not asked again);
                       ``auto`` never asks; not offered in ``read_only`` mode
``destructive``        never: listing it rejects the run; calling it raises ToolError
``long_task_only``     never (same two rules)
``disabled``           not offered
=====================  ==============================================================

Which tools are eligible at all: the session's MCP tools and the application's local tools;
never ``run_script`` itself nor sagents' built-in tools (the model's own shell and file tools).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import anyio
from rich.console import Console
from rich.syntax import Syntax

from sagents.core.literal import literal_text, printable
from sagents.core.permissions import PermissionMode
from sagents.core.spec import ToolSpec
from sagents.errors import ScriptRejectedError

__all__ = [
    "RUN_SCRIPT_TOOL_NAME",
    "AllowAllApprover",
    "ApprovalDecision",
    "ApprovalRequest",
    "Approver",
    "DenyAllApprover",
    "ExplainsDenial",
    "ScriptPlan",
    "TerminalApprover",
    "denial_reason",
    "offered_specs",
    "plan_script",
]

RUN_SCRIPT_TOOL_NAME = "run_script"

ApprovalDecision = Literal["allow_once", "deny"]
"""The only two answers to a script's approval request."""


def offered_specs(specs: Iterable[ToolSpec], mode: PermissionMode) -> list[ToolSpec]:
    """The tools a script could ever call in ``mode``, in the order given.

    Excludes built-in tools, ``run_script`` itself, disabled tools, and write tools in
    ``read_only`` mode. Destructive and long-task-only tools stay in the list (they are known,
    so a call to one can be refused by name), but are never callable.
    """
    offered = []
    for spec in specs:
        if spec.source.kind == "builtin" or spec.name == RUN_SCRIPT_TOOL_NAME:
            continue
        if spec.permission == "disabled":
            continue
        if mode == "read_only" and spec.permission == "write":
            continue
        offered.append(spec)
    return offered


@dataclass(frozen=True, kw_only=True)
class ScriptPlan:
    """The outcome of the pre-run check.

    Attributes:
        callable: The tools the script may call, by name.
        refusals: For offered tools it may not call, the reason given to the script.
        needs_approval: Listed write tools to approve before the run (``ask`` mode only).
    """

    callable: Mapping[str, ToolSpec]
    refusals: Mapping[str, str] = field(default_factory=dict)
    needs_approval: tuple[str, ...] = ()


def _direct_hint(name: str, what: str) -> str:
    return (
        f"tool {name!r} is {what} and cannot be called from a script; "
        f"call {name!r} directly instead (each call is approved on its own)"
    )


def plan_script(
    specs: Iterable[ToolSpec],
    listed: Sequence[str],
    mode: PermissionMode,
    *,
    session_allowed: Collection[str] = (),
) -> ScriptPlan:
    """Check a run_script request before it runs.

    Args:
        specs: Every tool of the session (built-ins and ``run_script`` are filtered out here).
        listed: The ``tools`` argument of run_script.
        mode: The session's permission mode.
        session_allowed: Tools the user already allowed for the whole session.

    Returns:
        The plan: callable tools, refusal reasons, and the listed write tools needing approval.

    Raises:
        ScriptRejectedError: when a listed tool is destructive or long-task-only (the message
            names it and tells the model to call it directly), or is unknown or not offered.
    """
    offered = {spec.name: spec for spec in offered_specs(specs, mode)}
    problems: list[str] = []
    for name in dict.fromkeys(listed):
        spec = offered.get(name)
        if spec is None:
            problems.append(
                f"tool {name!r} is not available to scripts in this session"
                + (
                    " (write tools are not offered in read-only mode)"
                    if mode == "read_only"
                    else ""
                )
            )
        elif spec.permission == "destructive":
            problems.append(_direct_hint(name, "destructive"))
        elif spec.permission == "long_task_only":
            problems.append(_direct_hint(name, "long-task-only"))
    if problems:
        raise ScriptRejectedError(
            "run_script rejected: " + "; ".join(problems),
            hint="remove these tools from 'tools'",
            details={
                "tools": [
                    n
                    for n in listed
                    if n not in offered
                    or offered[n].permission in ("destructive", "long_task_only")
                ]
            },
        )
    listed_set = set(listed)
    callable_: dict[str, ToolSpec] = {}
    refusals: dict[str, str] = {}
    for name, spec in offered.items():
        if spec.permission == "read_only" or (spec.permission == "write" and name in listed_set):
            callable_[name] = spec
        elif spec.permission == "write":
            refusals[name] = (
                f"write tool {name!r} was not listed in run_script's 'tools'; "
                "list it there to call it from the script"
            )
        elif spec.permission == "destructive":
            refusals[name] = _direct_hint(name, "destructive")
        else:
            refusals[name] = _direct_hint(name, "long-task-only")
    needs = tuple(
        name
        for name in dict.fromkeys(listed)
        if mode == "ask" and offered[name].permission == "write" and name not in session_allowed
    )
    return ScriptPlan(callable=callable_, refusals=refusals, needs_approval=needs)


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One approval before a run: the write tools it may call, and the script itself.

    Attributes:
        tools: The listed write tools that need approval.
        script: The script's source.
        description: run_script's ``description`` argument.
        session_id: The session asking, if known.
    """

    tools: tuple[str, ...]
    script: str
    description: str
    session_id: str | None = None


class Approver(Protocol):
    """Answers approval requests: a terminal prompt, allow-all, deny-all, MCP elicitation."""

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Return ``allow_once`` or ``deny``. Never raises for a refusal."""
        ...


@runtime_checkable
class ExplainsDenial(Protocol):
    """An approver that can say why it denied: whether a person was asked at all."""

    def denial_reason(self, request: ApprovalRequest) -> str:
        """What happened, for the model and the records, after ``approve`` answered ``deny``
        (for example "the user denied ...", or "nobody was asked ...: no terminal")."""
        ...


def denial_reason(approver: object, request: ApprovalRequest) -> str:
    """Why ``approver`` denied ``request``: its own words when it can say
    (:class:`ExplainsDenial`), else a neutral "were not approved" that claims no user decision."""
    if isinstance(approver, ExplainsDenial):
        return approver.denial_reason(request)
    return f"the write tools {', '.join(request.tools)} were not approved"


@dataclass(frozen=True)
class AllowAllApprover:
    """Allows every request (``auto`` mode, or a trusted caller)."""

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Always ``allow_once``."""
        return "allow_once"


@dataclass(frozen=True)
class DenyAllApprover:
    """Denies every request (non-interactive callers that must not write)."""

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Always ``deny``."""
        return "deny"

    def denial_reason(self, request: ApprovalRequest) -> str:
        """Nobody was asked: this session denies every approval."""
        return (
            f"nobody was asked to approve the write tools {', '.join(request.tools)}: "
            "this session cannot ask for approvals, so they are denied without asking"
        )


def _read_line(prompt: str) -> str:
    return input(prompt)


@dataclass(frozen=True, kw_only=True)
class TerminalApprover:
    """Asks on the terminal: shows the tools and the script, accepts "allow once" or "deny".

    Everything shown is the model's text printed literally (no Rich markup, control characters
    escaped, see :mod:`sagents.core.literal`), and every line of the script is shown whole,
    wrapped at the terminal's width rather than cut.

    Attributes:
        console: Where to show the request (stderr by default, so ``--json`` stdout stays clean).
        ask: Reads one answer line (``input`` by default; replaced in tests). End of input or
            anything but an "allow" answer denies.
    """

    console: Console = field(default_factory=lambda: Console(stderr=True))
    ask: Callable[[str], str] = _read_line

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Show the request and read the answer in a worker thread."""
        heading = literal_text("run_script wants to call write tools: ", style="bold")
        heading.append_text(literal_text(", ".join(request.tools)))
        self.console.print(heading)
        if request.description:
            self.console.print(literal_text(f"description: {request.description}"))
        script = Syntax(printable(request.script), "python", line_numbers=True, word_wrap=True)
        self.console.print(script)
        try:
            answer = await anyio.to_thread.run_sync(
                self.ask, "allow once / deny [a/d]: ", abandon_on_cancel=True
            )
        except EOFError:
            return "deny"
        return "allow_once" if answer.strip().lower() in ("a", "allow", "allow once") else "deny"

    def denial_reason(self, request: ApprovalRequest) -> str:
        """The user was asked at the terminal and did not allow."""
        return f"the user denied the write tools {', '.join(request.tools)} at the terminal prompt"

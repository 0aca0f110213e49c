"""Which tools a script may call and the pre-run check (docs/run_script.md, "Permissions").

The one approval before a run is asked through the one approval protocol of
:mod:`sagents.tool._approval` (``ApprovalRequest.for_script``: ``allow_once`` or ``deny``).

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

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSpec
from sagents.errors import ScriptRejectedError

__all__ = ["RUN_SCRIPT_TOOL_NAME", "ScriptPlan", "offered_specs", "plan_script"]

RUN_SCRIPT_TOOL_NAME = "run_script"


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
        offered: Every tool the script could ever call in this mode, callable or refused (its
            typed stubs are made from these: docs/run_script.md, "Typed stubs"); empty means
            the callable ones.
    """

    callable: Mapping[str, ToolSpec]
    refusals: Mapping[str, str] = field(default_factory=dict)
    needs_approval: tuple[str, ...] = ()
    offered: tuple[ToolSpec, ...] = ()


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
    return ScriptPlan(
        callable=callable_, refusals=refusals, needs_approval=needs, offered=tuple(offered.values())
    )

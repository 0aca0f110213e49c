"""Permission classes of tools and permission modes of sessions (docs/tools.md).

A tool's permission class says how dangerous a call is; a session's permission mode says how calls
of each class are treated. MCP tool annotations are hints only (MCP spec 2025-06-18,
"Tool annotations": unannotated means ``readOnlyHint=false`` and ``destructiveHint=true``); the
operator's configuration is trusted and may set any class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "PERMISSION_CLASSES",
    "PERMISSION_MODES",
    "PermissionClass",
    "PermissionMode",
    "ToolAnnotations",
    "classify_annotations",
    "parse_permission_mode",
]

PermissionClass = Literal["read_only", "write", "destructive", "long_task_only", "disabled"]
"""``read_only``: no side effects. ``write``: side effects, follows the session's mode.
``destructive``: every call approved one by one, never from a script. ``long_task_only``: must run
as a long task (MCP ``execution.taskSupport == "required"``), never from a script. ``disabled``:
never offered."""

PermissionMode = Literal["ask", "auto", "read_only"]
"""``ask``: writes need approval; ``auto``: writes run without asking; ``read_only``: only
read-only tools are offered."""

PERMISSION_CLASSES: tuple[PermissionClass, ...] = get_args(PermissionClass)
PERMISSION_MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)


@dataclass(frozen=True, kw_only=True)
class ToolAnnotations:
    """MCP tool annotations (MCP spec, ``ToolAnnotations``), as hints about behaviour.

    None means "not given"; :func:`classify_annotations` applies the spec's defaults.
    """

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


def classify_annotations(
    annotations: ToolAnnotations | None, *, task_support: str | None = None
) -> PermissionClass:
    """Map MCP annotations to a permission class, with the MCP spec's defaults.

    Args:
        annotations: The tool's annotations, or None when it has none.
        task_support: The tool's ``execution.taskSupport`` (protocol <= 2025-11-25), if any.

    Returns:
        ``long_task_only`` when ``task_support == "required"``; ``read_only`` when
        ``readOnlyHint`` is true; ``write`` when ``readOnlyHint`` is false and
        ``destructiveHint`` is false; otherwise ``destructive`` (the default of an unannotated
        tool, as the spec says).
    """
    if task_support == "required":
        return "long_task_only"
    if annotations is None:
        return "destructive"
    if annotations.read_only_hint is True:
        return "read_only"
    if annotations.destructive_hint is False:
        return "write"
    return "destructive"


def parse_permission_mode(value: str) -> PermissionMode:
    """Parse a mode as users spell it: ``ask``, ``auto``, ``read_only`` or ``read-only``.

    Raises:
        ValueError: for any other spelling, listing the accepted ones.
    """
    normalised = value.strip().lower().replace("-", "_")
    for mode in PERMISSION_MODES:
        if mode == normalised:
            return mode
    raise ValueError(f"unknown permission mode {value!r}; use one of: ask, auto, read-only")

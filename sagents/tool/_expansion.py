"""``tool_expand_tools``: the protocol tool of tool suggestion (docs/agent.md, "Tool
suggestion"; docs/gateway.md, "Tool search").

Suggestion narrows which of a session's tools a model is *offered*, never which it may *call*;
and the narrowing is enforced at execution: a call of an allowed tool that was not offered is
refused with :func:`not_offered_result`, which tells the model to expand it first. The agent
loop and ``sagents serve --tool-search`` share this module, so the tool's schema, its result
and the refusal read the same on both paths.

The result of ``tool_expand_tools({"tool_names": [...]})`` is, exactly::

    {"success": true, "expanded_tools": [...], "invalid_tools": [...],
     "already_selected_tools": [...], "available_expandable_tools": [...]}

Partial success: each valid name is expanded, each invalid one only reported. Validity is
judged against the session's allowed set, never a global registry.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sagents.core._permissions import ToolAnnotations
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.errors import InvalidArgumentsError, NotAllowedError

__all__ = [
    "EXPAND_TOOL_NAME",
    "EXPAND_TOOL_SPEC",
    "Expansion",
    "expand",
    "not_offered_result",
    "requested_names",
]

EXPAND_TOOL_NAME = "tool_expand_tools"
"""The name of the expansion tool."""

EXPAND_TOOL_SPEC = ToolSpec(
    name=EXPAND_TOOL_NAME,
    description=(
        "Add tools to the ones you were given, by their exact names. Only some of this "
        "session's tools are offered at a time; to call another one, expand it first, then "
        "call it in a later step. The result lists the names expanded, the invalid ones, the "
        "ones you already had, and every name that can still be expanded (call it with an "
        "empty list to see them)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "tool_names": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Exact tool names, e.g. ['fleet__get_device_status'].",
            }
        },
        "required": ["tool_names"],
        "additionalProperties": False,
    },
    annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True),
    permission="read_only",
    source=ToolSource(kind="builtin"),
)
"""The spec of ``tool_expand_tools`` (read-only: it changes what is offered, nothing else)."""


@dataclass(frozen=True, kw_only=True)
class Expansion:
    """What one ``tool_expand_tools`` call did (names as the model uses them).

    Attributes:
        expanded: Names added to the session's selection, in request order.
        invalid: Names that are not among the session's allowed tools.
        already_selected: Names the session was already offered.
        available: Allowed names still not selected after this call, in the session's order.
    """

    expanded: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()
    already_selected: tuple[str, ...] = ()
    available: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The tool's result: ``{"success": true, "expanded_tools", "invalid_tools",
        "already_selected_tools", "available_expandable_tools"}``."""
        return {
            "success": True,
            "expanded_tools": list(self.expanded),
            "invalid_tools": list(self.invalid),
            "already_selected_tools": list(self.already_selected),
            "available_expandable_tools": list(self.available),
        }

    def to_result(self) -> ToolResult:
        """:meth:`to_dict` as a tool result (structured, with its JSON text)."""
        return ToolResult.from_structured(self.to_dict())


def requested_names(arguments: Mapping[str, Any]) -> list[str]:
    """The ``tool_names`` of a call's arguments.

    Raises:
        InvalidArgumentsError: ``tool_names`` is missing or not a list of strings.
    """
    names = arguments.get("tool_names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidArgumentsError(
            f"{EXPAND_TOOL_NAME} takes 'tool_names', a list of exact tool names, not {names!r}",
            hint=f'call {EXPAND_TOOL_NAME}({{"tool_names": ["name_a", "name_b"]}})',
            details={"tool": EXPAND_TOOL_NAME, "argument": "tool_names"},
        )
    return list(names)


def expand(
    requested: Sequence[str],
    *,
    allowed: Sequence[str],
    selected: Collection[str],
    aliases: Mapping[str, str] | None = None,
) -> Expansion:
    """Judge one expansion request (the caller then adds :attr:`Expansion.expanded`).

    Names are matched exactly (no case folding, no prefix or fuzzy matching): a model that
    guessed wrong gets the name back as invalid, with every name it could expand.

    Args:
        requested: The names asked for (duplicates count once).
        allowed: The session's allowed tools, as the model names them, in a stable order.
        selected: The names the session is already offered.
        aliases: Other exact names of allowed tools (a registered name whose exported name
            differs) mapped to the model's name.

    Returns:
        The :class:`Expansion`.
    """
    allowed_set = set(allowed)
    aliases = aliases or {}
    taken = set(selected)
    expanded: list[str] = []
    invalid: list[str] = []
    already: list[str] = []
    seen: set[str] = set()
    for raw in requested:
        if raw in seen:
            continue
        seen.add(raw)
        name = raw if raw in allowed_set else aliases.get(raw, "")
        if name not in allowed_set:
            invalid.append(raw)
        elif name in taken:
            if name not in already:
                already.append(name)
        else:
            taken.add(name)
            expanded.append(name)
    available = tuple(name for name in allowed if name not in taken)
    return Expansion(
        expanded=tuple(expanded),
        invalid=tuple(invalid),
        already_selected=tuple(already),
        available=available,
    )


def not_offered_result(name: str) -> ToolResult:
    """The result of a call of an allowed tool that was not offered: expand it first."""
    return ToolResult.from_exception(
        NotAllowedError(
            f"tool {name!r} was not offered in this step, so it was not run",
            hint=(
                f'call {EXPAND_TOOL_NAME}({{"tool_names": ["{name}"]}}) first, then call '
                f"{name!r} again in the next step"
            ),
            details={"name": name, "expand_with": EXPAND_TOOL_NAME},
        )
    )

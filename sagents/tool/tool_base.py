"""STAND-IN for the ``toolschema`` branch: the ``@tool`` decorator.

Minimal version so that the tool manager can be built and tested before that branch is merged;
the lead replaces this file with the real one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from sagents.tool.local_tool import LocalTool, build_local_tool

__all__ = ["discovered_tools", "get_local_tool", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "__sagents_tool__"
_DISCOVERED: list[LocalTool] = []  # the documented process-default collection


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[F], F]: ...
def tool(
    func: F | None = None, /, *, name: str | None = None, description: str | None = None
) -> F | Callable[[F], F]:
    """``@tool``, ``@tool()`` or ``@tool(name=..., description=...)``."""

    def decorate(f: F) -> F:
        local = build_local_tool(f, name=name, description=description)
        setattr(f, _ATTRIBUTE, local)
        _DISCOVERED.append(local)
        return f

    return decorate(func) if func is not None else decorate


def get_local_tool(obj: object) -> LocalTool | None:
    """What ``@tool`` attached to ``obj``, or None."""
    found = getattr(obj, _ATTRIBUTE, None)
    return found if isinstance(found, LocalTool) else None


def discovered_tools() -> list[LocalTool]:
    """Every ``@tool`` seen so far in this process, in definition order."""
    return list(_DISCOVERED)

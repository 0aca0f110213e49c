"""The ``@tool`` decorator (the public path; docs/tool-schema.md).

Three forms, all returning the function itself, still callable exactly as before::

    @tool
    def add(a: int, b: int) -> int: ...

    @tool()
    async def ping() -> str: ...

    @tool(name="get_weather", description="按城市名查询天气")
    async def get_weather(city: str) -> dict: ...

The decorator checks the signature at once (``*args``/``**kwargs`` are refused) and records the
tool; its schema is built later, when first needed, so annotations may name types defined further
down the module.

Collection: a module's tools are collected once the module is imported. That stays
an explicit step: decorated functions are appended to a process-wide list,
:func:`discovered_tools`, which the process-default ``ToolManager`` reads through
``collect_discovered()``; a ``ToolManager()`` built anywhere else holds only what it is given.

Methods: ``@tool`` on a method (first parameter ``self`` or ``cls``) is not collected, since it
needs an instance; ``get_local_tool(instance.method)`` gives a tool bound to that instance.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from sagents.core._permissions import PermissionClass, ToolAnnotations
from sagents.errors import ToolDefinitionError
from sagents.tool._local_tool import LocalTool, build_local_tool

__all__ = ["ToolOptions", "discovered_tools", "get_local_tool", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "__sagents_tool__"
_DISCOVERED_TOOLS: list[LocalTool] = []  # public name; the process default reads it
_DISCOVERED_LOCK = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class ToolOptions:
    """What ``@tool(...)`` was given, kept on the decorated function.

    Attributes:
        name: The tool name, or None for the function's name.
        description: The description, or None for the docstring's.
        annotations: MCP-style behaviour hints, or None.
        permission: The permission class, or None for the default.
        examples: Sample arguments objects (docs/tools.md, "Examples"), or None.
        local_tool: The tool built for a plain function; None for a method (it needs an
            instance: see :func:`get_local_tool`).
    """

    name: str | None = None
    description: str | None = None
    annotations: ToolAnnotations | None = None
    permission: PermissionClass | None = None
    examples: tuple[dict[str, Any], ...] | None = None
    local_tool: LocalTool | None = None


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    permission: PermissionClass | None = None,
    examples: Sequence[dict[str, Any]] | None = None,
) -> Callable[[F], F]: ...


def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    permission: PermissionClass | None = None,
    examples: Sequence[dict[str, Any]] | None = None,
) -> F | Callable[[F], F]:
    """Mark a function (sync or async) or a method as a tool.

    Args:
        func: The function, in the bare ``@tool`` form.
        name: The tool name; the function's ``__name__`` by default.
        description: The description; the docstring's summary and description by default.
        annotations: MCP-style behaviour hints (:class:`~sagents.core.ToolAnnotations`).
        permission: The permission class; by default classified from ``annotations`` when they
            are given, else ``write``.
        examples: Sample arguments objects, exported as Anthropic's ``input_examples`` and
            in the description for the other providers (docs/tools.md, "Examples"); each
            must match the tool's input schema (checked when its spec is built).

    Returns:
        The function itself (bare form), or a decorator that returns it.

    Raises:
        ToolDefinitionError: at decoration time, for ``*args``/``**kwargs`` or positional-only
            parameters, when applied above ``@classmethod``/``@staticmethod``, or for
            ``examples`` that are not a list of dicts.
    """
    checked_examples = _checked_examples(examples)

    def decorate(target: F) -> F:
        if isinstance(target, classmethod | staticmethod):
            kind = type(target).__name__
            raise ToolDefinitionError(
                f"@tool was applied to a {kind} object, not to a function",
                hint=f"Put @{kind} above @tool (so @tool sees the function).",
            )
        local: LocalTool | None = None
        if _is_method(target):
            build_local_tool(_skip_first(target), name=name or target.__name__)  # checks only
        else:
            local = build_local_tool(
                target,
                name=name,
                description=description,
                annotations=annotations,
                permission=permission,
                examples=checked_examples,
            )
            with _DISCOVERED_LOCK:
                _DISCOVERED_TOOLS.append(local)
        options = ToolOptions(
            name=name,
            description=description,
            annotations=annotations,
            permission=permission,
            examples=checked_examples,
            local_tool=local,
        )
        setattr(target, _ATTRIBUTE, options)
        return target

    if func is not None:
        return decorate(func)
    return decorate


def _checked_examples(
    examples: Sequence[dict[str, Any]] | None,
) -> tuple[dict[str, Any], ...] | None:
    if examples is None:
        return None
    if isinstance(examples, str | bytes | dict) or not isinstance(examples, Sequence):
        raise ToolDefinitionError(
            f"examples must be a list of arguments dicts, not {type(examples).__name__}",
            hint='examples=[{"city": "Lisbon"}]',
        )
    for index, example in enumerate(examples):
        if not isinstance(example, dict):
            raise ToolDefinitionError(
                f"example {index} must be a dict of arguments, not {type(example).__name__}",
                hint='examples=[{"city": "Lisbon"}]',
            )
    return tuple(examples)


def get_local_tool(obj: Any) -> LocalTool | None:
    """The :class:`LocalTool` of a ``@tool`` function or bound method, or None if undecorated.

    Args:
        obj: A decorated function; a bound method whose function was decorated (the tool is
            bound to that instance; ``self`` is not in the schema); or a wrapper made with
            ``functools.wraps`` around a decorated function (the wrapper is called).

    Raises:
        ToolDefinitionError: for a decorated method taken from its class (``C.method``), which
            has no instance to run on.
    """
    options = getattr(obj, _ATTRIBUTE, None)
    if not isinstance(options, ToolOptions):
        return None
    if options.local_tool is not None and options.local_tool.func is obj:
        return options.local_tool
    if options.local_tool is None and _is_method(obj):
        # The method taken from its class (``C.method``): ``self`` would become an argument
        # the model must send, and the method would run on whatever the model sent.
        owner = obj.__qualname__.rsplit(".", 1)[0]
        raise ToolDefinitionError(
            f"{obj.__qualname__!r} is a method: register it bound to an instance",
            hint=f"Register {owner}(...).{obj.__name__}, not {obj.__qualname__}.",
            details={"function": obj.__qualname__},
        )
    # A bound method, or a wrapper that copied the function's attributes (functools.wraps).
    return build_local_tool(
        obj,
        name=options.name,
        description=options.description,
        annotations=options.annotations,
        permission=options.permission,
        examples=options.examples,
    )


def discovered_tools() -> list[LocalTool]:
    """The tools that ``@tool`` has collected in this process so far (a copy, in order)."""
    with _DISCOVERED_LOCK:
        return list(_DISCOVERED_TOOLS)


def _is_method(func: Callable[..., Any]) -> bool:
    if inspect.ismethod(func):
        return False
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return False
    qualname = getattr(func, "__qualname__", None)
    if not inspect.isfunction(func) or not isinstance(qualname, str):
        return False  # a partial or a callable instance is never an unbound method
    owner = qualname.rpartition(".")[0]
    # Defined in a class body: "C.m" or "f.<locals>.C.m"; not a function nested in a function
    # ("f.<locals>.g"), whose first parameter may well be called ``cls``.
    in_class = bool(owner) and not owner.endswith("<locals>")
    return bool(params) and params[0] in ("self", "cls") and in_class


def _skip_first(func: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in bound to a placeholder, so the signature check sees the method's arguments."""
    return func.__get__(object())  # type: ignore[no-any-return]

"""STAND-IN for the ``toolschema`` branch: ``LocalTool`` and ``build_local_tool``.

Minimal version (schema from a pydantic model built from the signature; no docstring parsing,
no output schema) so that the tool manager can be built and tested before that branch is
merged; the lead replaces this file with the real one.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import pydantic

from sagents.core.permissions import PermissionClass, ToolAnnotations
from sagents.core.spec import ToolSpec
from sagents.errors import InvalidArgumentsError, ToolDefinitionError
from sagents.tool.context import InjectedArg, SessionContext

__all__ = ["LocalTool", "build_local_tool"]


@dataclass(frozen=True, kw_only=True)
class LocalTool:
    """A Python function as a tool: its spec, the function, and its injected parameters."""

    spec: ToolSpec
    func: Callable[..., Any]
    is_async: bool
    injected: Mapping[str, Any]
    model: type[pydantic.BaseModel]

    def bind(self, arguments: Mapping[str, Any], context: SessionContext) -> dict[str, Any]:
        """Validate ``arguments`` (pydantic, lax) and add the injected values.

        Raises:
            InvalidArgumentsError: when pydantic rejects the arguments.
        """
        try:
            validated = self.model.model_validate(dict(arguments))
        except pydantic.ValidationError as error:
            problems = [
                {"path": "/".join(str(p) for p in e["loc"]), "message": e["msg"]}
                for e in error.errors()
            ]
            raise InvalidArgumentsError(
                f"invalid arguments for tool {self.spec.name!r}", details={"problems": problems}
            ) from None
        bound = {name: getattr(validated, name) for name in validated.model_fields_set}
        for name, marker in self.injected.items():
            if marker is SessionContext:
                bound[name] = context
            else:
                bound[name] = context.lookup(marker.key or name)
        return bound

    async def invoke(self, arguments: Mapping[str, Any], context: SessionContext) -> Any:
        """Bind and call (sync functions in a worker thread); return the raw return value."""
        bound = self.bind(arguments, context)
        if self.is_async:
            return await self.func(**bound)
        call = functools.partial(self.func, **bound)
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)


def build_local_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    permission: PermissionClass | None = None,
) -> LocalTool:
    """Build a :class:`LocalTool` from a function's signature.

    Raises:
        ToolDefinitionError: for ``*args``/``**kwargs``.
    """
    hints = typing.get_type_hints(func, include_extras=True)
    fields: dict[str, Any] = {}
    injected: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {func.__name__!r}: *args/**kwargs are not supported")
        hint = hints.get(param.name, Any)
        if hint is SessionContext:
            injected[param.name] = SessionContext
            continue
        marker = next(
            (m for m in getattr(hint, "__metadata__", ()) if isinstance(m, InjectedArg)), None
        )
        if marker is not None:
            injected[param.name] = marker
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hint, default)
    model = pydantic.create_model(f"{func.__name__}_args", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    spec = ToolSpec(
        name=name or func.__name__,
        description=description or inspect.getdoc(func) or "",
        input_schema=schema,
        annotations=annotations or ToolAnnotations(),
        permission=permission or "write",
    )
    return LocalTool(
        spec=spec,
        func=func,
        is_async=inspect.iscoroutinefunction(func),
        injected=injected,
        model=model,
    )

"""``LocalTool``: a Python function as a tool, with its spec, argument binding and invocation.

The spec is computed lazily, the first time it is needed (:attr:`LocalTool.spec`), so that a
tool may name a type defined later in its module; see :mod:`sagents.tool._signature` for how
signatures become schemas.

Injected parameters (docs/tool-schema.md, "Injected parameters"): a parameter annotated
``SessionContext`` (or ``SessionContext | None``) receives the call's context;
``Annotated[T, InjectedArg(key)]`` receives ``context.lookup(key or name)``. Neither appears in
the schema, and because the schema refuses unknown properties, an argument the model sends under
an injected parameter's name is rejected as unknown: a model can never set an injected value.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio.to_thread
import pydantic

from sagents.core._permissions import PermissionClass, ToolAnnotations, classify_annotations
from sagents.core._spec import ToolSource, ToolSpec
from sagents.errors import InvalidArgumentsError, ToolDefinitionError, ToolExecutionError
from sagents.tool._context import InjectedArg, SessionContext
from sagents.tool._examples import EXAMPLES_META_KEY, invalid_examples
from sagents.tool._signature import (
    CallableInfo,
    Injection,
    ResolvedSignature,
    inspect_callable,
    resolve_signature,
)

__all__ = ["LocalTool", "build_local_tool"]


@dataclass(frozen=True, kw_only=True, eq=False)  # identity: defaults may be unhashable
class LocalTool:
    """A Python function (or bound method) registered as a tool.

    Build one with :func:`build_local_tool` or ``@tool`` + ``get_local_tool``.

    Attributes:
        func: The original function or bound method, called with keyword arguments.
        is_async: True for ``async def`` functions.
        name: The tool's name (the function's ``__name__`` unless given).
        description: The description given to ``@tool``; None means "from the docstring".
        annotations: MCP-style annotations given to ``@tool``, or None.
        permission: The permission class given to ``@tool``, or None.
        info: The signature as read when the tool was defined.
        examples: Sample arguments objects given to ``@tool``, or None (in the spec's
            ``meta``, :data:`~sagents.tool._examples.EXAMPLES_META_KEY`).
    """

    func: Callable[..., Any]
    is_async: bool
    name: str
    description: str | None = None
    annotations: ToolAnnotations | None = None
    permission: PermissionClass | None = None
    info: CallableInfo = field(repr=False)
    examples: tuple[dict[str, Any], ...] | None = None

    @functools.cached_property
    def resolved(self) -> ResolvedSignature:
        """The resolved signature (computed once, on first use).

        Raises:
            ToolDefinitionError: when an annotation cannot be resolved (naming the missing name)
                or has no JSON Schema. Nothing is cached then, so a later access retries.
        """
        return resolve_signature(self.func, self.info)

    @functools.cached_property
    def spec(self) -> ToolSpec:
        """The tool's spec: ``source.kind == "local"``, input schema without injected parameters.

        The permission class is the one given to ``@tool``; else classified from the annotations
        when any were given (:func:`sagents.core._permissions.classify_annotations`); else
        ``write``.

        Raises:
            ToolDefinitionError: as :attr:`resolved`.
        """
        resolved = self.resolved
        if self.permission is not None:
            permission: PermissionClass = self.permission
        elif self.annotations is not None:
            permission = classify_annotations(self.annotations)
        else:
            permission = "write"
        meta: dict[str, Any] = {}
        if self.examples is not None:
            problems = invalid_examples(list(self.examples), resolved.input_schema)
            if problems:
                raise ToolDefinitionError(
                    f"tool {self.name!r}: " + "; ".join(problems),
                    hint="each example is an arguments object the tool accepts",
                )
            meta[EXAMPLES_META_KEY] = list(self.examples)
        return ToolSpec(
            name=self.name,
            description=self.description if self.description is not None else self.info.description,
            input_schema=resolved.input_schema,
            output_schema=resolved.output_schema,
            annotations=self.annotations or ToolAnnotations(),
            permission=permission,
            source=ToolSource(kind="local"),
            meta=meta,
        )

    def bind_valid(
        self, arguments: dict[str, Any], context: SessionContext | None
    ) -> dict[str, Any]:
        """:meth:`bind` for arguments that already satisfy :attr:`spec`'s input schema.

        When pydantic would return every value as it is (each parameter a bare ``int``,
        ``str``, ``bool``, ``float``, optional one of those, or unannotated; a scalar default
        or none; no constraints; nothing injected; each value of exactly its type), the
        arguments are the keyword arguments and pydantic is not run a second time over what
        the compiled schema check just accepted (an absent parameter gets the function's own
        default, which is the model's). Anything else goes through :meth:`bind`.

        Args:
            arguments: Arguments the input schema accepts (a dict owned by the call).
            context: As :meth:`bind`.

        Returns:
            Parameter name -> value, for ``func(**kwargs)``.

        Raises:
            As :meth:`bind`.
        """
        accepted = self._as_is
        if accepted is not None:
            for name, value in arguments.items():
                kinds = accepted[name]  # present: the schema refuses unknown properties
                if kinds is not None and type(value) not in kinds:
                    break
            else:
                return arguments
        return self.bind(arguments, context)

    @functools.cached_property
    def scalar_kinds(self) -> dict[str, frozenset[type]] | None:
        """Parameter name -> the exact scalar types :meth:`bind_valid` passes as they are, when
        every parameter has such types (none unannotated); else None."""
        accepted = self._as_is
        if accepted is None:
            return None
        kinds = {name: kind for name, kind in accepted.items() if kind is not None}
        return kinds if len(kinds) == len(accepted) else None

    @functools.cached_property
    def _parameter_names(self) -> tuple[str, ...]:
        return tuple(param.name for param in self.info.parameters)

    @functools.cached_property
    def _plain_binding(self) -> bool:
        """True when nothing is injected and the argument model's fields are the parameters
        in order (``p0``, ``p1``, ... aliased by the parameters' names)."""
        resolved = self.resolved
        return not resolved.injected and list(resolved.field_names) == list(self._parameter_names)

    @functools.cached_property
    def _as_is(self) -> dict[str, frozenset[type] | None] | None:
        """Parameter name -> the exact value types pydantic returns unchanged (None: any), or
        None when some parameter does not qualify (see :meth:`bind_valid`)."""
        if not self._plain_binding:
            return None
        fields = self.resolved.model.model_fields
        accepted: dict[str, frozenset[type] | None] = {}
        for param in self.info.parameters:
            field = fields[self.resolved.field_names[param.name]]
            try:
                kinds = _AS_IS.get(field.annotation, _NOT_AS_IS)
            except TypeError:  # an unhashable annotation: not one of those
                return None
            if kinds is _NOT_AS_IS or field.metadata:
                return None
            if param.default is inspect.Parameter.empty:
                if not field.is_required():
                    return None  # a default from the annotation: pydantic fills it in
            elif field.is_required() or field.default is not param.default:
                return None
            elif type(param.default) not in _SCALARS:
                return None  # pydantic may copy a mutable default
            accepted[param.name] = kinds
        return accepted

    @property
    def injected(self) -> Mapping[str, Injection]:
        """Parameter name -> what the host injects (``SessionContext`` or an ``InjectedArg``)."""
        return self.resolved.injected

    @property
    def output_wrapped(self) -> bool:
        """True when the output schema wraps a non-object return as ``{"result": value}``."""
        return self.resolved.output_wrapped

    def bind(self, arguments: Mapping[str, Any], context: SessionContext | None) -> dict[str, Any]:
        """Validate JSON-like arguments and return the keyword arguments for :attr:`func`.

        Validation is pydantic's lax mode (``"5"`` becomes ``5``); values are converted to what
        the annotations say (Enum members, dataclass / model / TypedDict values, tuples, sets).
        Injected parameters get their values from ``context``; an injected parameter with a
        default keeps the default when the context lacks the value.

        Args:
            arguments: The model's arguments (a JSON object).
            context: The calling session; None only for a tool that injects nothing
                (:attr:`injected` is empty).

        Returns:
            Parameter name -> value, for ``func(**kwargs)``.

        Raises:
            InvalidArgumentsError: with ``details["problems"]`` listing every problem as
                ``"<path>: <message>"``.
            ToolExecutionError: when an injected value is missing from the context (naming the
                key).
            ToolDefinitionError: as :attr:`resolved`.
        """
        resolved = self.resolved
        try:
            validated = resolved.model.model_validate(
                arguments if type(arguments) is dict else dict(arguments)
            )
        except pydantic.ValidationError as error:
            problems = [_problem(e) for e in error.errors(include_url=False)]
            raise InvalidArgumentsError(
                f"invalid arguments for tool {self.name!r}: " + "; ".join(problems),
                hint="fix the listed arguments and call again",
                details={"tool": self.name, "problems": problems},
            ) from None
        if self._plain_binding:  # the fields are the parameters, in order
            return dict(zip(self._parameter_names, validated.__dict__.values(), strict=True))
        kwargs: dict[str, Any] = {}
        for param in self.info.parameters:
            name = param.name
            if name in resolved.field_names:
                kwargs[name] = getattr(validated, resolved.field_names[name])
                continue
            injection = resolved.injected[name]
            assert context is not None, "a tool that injects values needs a SessionContext"
            if injection is SessionContext:
                # the decision was this call's: the tool's own calls are decided on their own
                kwargs[name] = context if context.decision is None else _undecided(context)
                continue
            assert isinstance(injection, InjectedArg)
            key = injection.key or name
            try:
                kwargs[name] = context.lookup(key)
            except KeyError:
                if param.default is not inspect.Parameter.empty:
                    continue
                raise ToolExecutionError(
                    f"tool {self.name!r} needs the trusted value {key!r}, "
                    "which the session context does not hold",
                    hint=f"put {key!r} into SessionContext.trusted when creating the session",
                    details={"tool": self.name, "key": key},
                ) from None
        return kwargs

    async def invoke(self, arguments: Mapping[str, Any], context: SessionContext) -> Any:
        """:meth:`bind`, then call: ``await`` async functions, run sync ones in a worker thread.

        Returns:
            The function's raw return value.

        Raises:
            InvalidArgumentsError, ToolExecutionError, ToolDefinitionError: as :meth:`bind`;
            whatever the function raises propagates unchanged.
        """
        kwargs = self.bind(arguments, context)
        if self.is_async:
            return await self.func(**kwargs)
        return await anyio.to_thread.run_sync(functools.partial(self.func, **kwargs))


_SCALARS = frozenset({int, str, bool, float, type(None)})
_NOT_AS_IS = frozenset[type]()
# Annotation -> the value types pydantic's lax mode returns unchanged for it (None: any value);
# ``int | None`` is also ``Optional[int]``.
_AS_IS: dict[Any, frozenset[type] | None] = {
    Any: None,
    **{kind: frozenset({kind}) for kind in (int, str, bool, float)},
    **{kind | None: frozenset({kind, type(None)}) for kind in (int, str, bool, float)},
}


def _problem(error: Any) -> str:
    path = ".".join(str(part) for part in error.get("loc", ())) or "(arguments)"
    return f"{path}: {error.get('msg', 'invalid')}"


def build_local_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    permission: PermissionClass | None = None,
    examples: tuple[dict[str, Any], ...] | None = None,
) -> LocalTool:
    """Wrap a function or bound method as a :class:`LocalTool` (nothing is resolved yet).

    Args:
        func: A sync or async function, or a bound method (``self`` is not an argument).
        name: The tool name; the function's ``__name__`` by default.
        description: The tool description; the docstring's summary and description by default.
        annotations: MCP-style behaviour hints.
        permission: The permission class; see :attr:`LocalTool.spec` for the default.
        examples: Sample arguments objects (checked against the schema when the spec is built).

    Raises:
        ToolDefinitionError: for ``*args``/``**kwargs``/positional-only parameters, an empty
            name, or something that is not callable.
    """
    if not callable(func):
        raise ToolDefinitionError(f"a tool must be a function, not {type(func).__name__!r}")
    info = inspect_callable(func)
    tool_name = name if name is not None else _default_name(func)
    if not tool_name:
        raise ToolDefinitionError(
            f"tool {info.qualname!r} needs a non-empty name",
            hint="pass name= (a callable instance has no name of its own)",
        )
    return LocalTool(
        func=func,
        is_async=info.is_async,
        name=tool_name,
        description=description,
        annotations=annotations,
        permission=permission,
        info=info,
        examples=examples,
    )


def _default_name(func: Callable[..., Any]) -> str | None:
    """``__name__``; for a ``functools.partial``, its function's; a callable instance has none."""
    while isinstance(func, functools.partial):
        func = func.func
    name = getattr(func, "__name__", None)
    return name if isinstance(name, str) else None


def _undecided(context: SessionContext) -> SessionContext:
    return replace(context, decision=None)

"""From a Python signature and docstring to a pydantic model and JSON Schemas.

Every type goes through pydantic (``create_model`` for the arguments, ``TypeAdapter`` for the
return value); there is no hand-written type switch, so unions keep every member, ``Literal`` and
``Enum`` keep their values, and ``X | None`` without a default stays required (but nullable).

Two steps, because of forward references:

1. :func:`inspect_callable` runs when ``@tool`` runs. It reads the signature (refusing
   ``*args``, ``**kwargs`` and positional-only parameters) and the docstring, but resolves no
   annotation: a name defined later in the module does not exist yet.
2. :func:`resolve_signature` runs when the schema is first needed. It resolves annotations with
   :func:`typing.get_type_hints` (``from __future__ import annotations`` and string annotations
   included), splits off the parameters the host injects, and builds the argument model. A name
   that still does not exist raises :class:`~sagents.errors.ToolDefinitionError` naming it; the
   generator never falls back to ``string``.

Schemas are cleaned for models: pydantic's generated ``title`` keywords are dropped; ``$defs``
stay at the root and every ``$ref`` stays valid. Unknown arguments are refused
(``additionalProperties: false``), which is also how a model is kept from naming an injected
parameter.

Output schema (MCP spec 2025-06-18, "Structured Content": ``structuredContent`` is an object):
no annotation, ``None``, ``Any``, ``str`` and ``bytes`` mean unstructured output (no schema); an
object type (``dict``, a mapping, a pydantic model, a dataclass, a ``TypedDict``) gives its own
schema; any other type (``int``, ``list[str]``, a union, ...) is wrapped as
``{"type": "object", "properties": {"result": ...}, "required": ["result"]}`` and the return value
must then be sent as ``{"result": value}`` (:attr:`ResolvedSignature.output_wrapped`).
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

import docstring_parser
import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from sagents.errors import ToolDefinitionError
from sagents.tool._context import InjectedArg, SessionContext
from sagents.tool._json_schema import clean_schema, resolve_local_ref

__all__ = [
    "CallableInfo",
    "Injection",
    "ParameterInfo",
    "ResolvedSignature",
    "callable_qualname",
    "inspect_callable",
    "resolve_signature",
]

Injection = InjectedArg | type[SessionContext]
"""What the host injects into a parameter: the SessionContext itself, or a trusted value."""

_UNSTRUCTURED_RETURNS: tuple[Any, ...] = (
    inspect.Signature.empty,
    None,
    type(None),
    Any,
    str,
    bytes,
)


@dataclass(frozen=True, kw_only=True)
class ParameterInfo:
    """One parameter as the signature declares it (annotation not yet resolved).

    Attributes:
        name: The parameter's name (also the argument's name in the schema).
        default: The default value, or ``inspect.Parameter.empty`` when required.
        description: The docstring's description of the parameter, or None.
    """

    name: str
    default: Any
    description: str | None


@dataclass(frozen=True, kw_only=True)
class CallableInfo:
    """What ``@tool`` learns without resolving annotations.

    Attributes:
        qualname: The function's qualified name (for error messages).
        parameters: The parameters the caller passes (``self`` of a bound method excluded).
        description: The docstring's summary and long description ("" when none).
        is_async: True for ``async def`` functions (and bound async methods).
    """

    qualname: str
    parameters: tuple[ParameterInfo, ...]
    description: str
    is_async: bool


@dataclass(frozen=True, kw_only=True)
class ResolvedSignature:
    """The resolved signature: argument model, injections and schemas.

    Attributes:
        model: The pydantic model of the model-visible arguments (fields are aliased to the
            parameter names, so any parameter name works, ``model_config`` included).
        field_names: Parameter name -> the model's field name.
        injected: Parameter name -> what the host injects.
        input_schema: JSON Schema of the arguments (root ``type: object``, ``$defs`` at the root).
        output_schema: JSON Schema of the structured result, or None (see the module docstring).
        output_wrapped: True when the return value is sent as ``{"result": value}``.
    """

    model: type[BaseModel]
    field_names: Mapping[str, str]
    injected: Mapping[str, Injection]
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    output_wrapped: bool


def inspect_callable(func: Callable[..., Any]) -> CallableInfo:
    """Read a function's (or bound method's) signature and docstring, resolving nothing.

    Args:
        func: A function, or a bound method (its ``self``/``cls`` is not a parameter).

    Returns:
        The parameters with their docstring descriptions, the tool description taken from the
        docstring (Google, NumPy or Sphinx style, via ``docstring-parser``) and whether it is async.

    Raises:
        ToolDefinitionError: for ``*args``, ``**kwargs`` or positional-only parameters (a model
            sends named arguments only), or when ``func`` has no readable signature.
    """
    qualname = callable_qualname(func)
    try:
        signature = inspect.signature(func, eval_str=False)
    except (TypeError, ValueError) as error:
        raise ToolDefinitionError(f"cannot read the signature of {qualname!r}: {error}") from error
    text = _docstring_text(func)
    try:
        docs = docstring_parser.parse(text)
    except docstring_parser.ParseError:  # a docstring never stops a tool: keep it as prose
        docs = docstring_parser.Docstring()
        docs.short_description = text
    param_docs = {p.arg_name: p.description for p in docs.params if p.description}
    # Keywords a functools.partial fixed are the host's, not the model's (like injections).
    fixed = set(func.keywords) if isinstance(func, functools.partial) else set()
    parameters: list[ParameterInfo] = []
    for param in signature.parameters.values():
        if param.name in fixed:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"tool {qualname!r} takes {star}{param.name}: a tool needs named parameters",
                hint=(
                    "declare each argument as a named parameter "
                    f"(a model sends named arguments, which {star}{param.name} does not declare)"
                ),
                details={"tool": qualname, "parameter": param.name},
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {qualname!r}: parameter {param.name!r} is positional-only",
                hint="remove the '/' from the signature; tools are called with named arguments",
                details={"tool": qualname, "parameter": param.name},
            )
        parameters.append(
            ParameterInfo(
                name=param.name, default=param.default, description=param_docs.get(param.name)
            )
        )
    returns = docs.returns.description if docs.returns and docs.returns.description else None
    description = "\n\n".join(
        part.strip()
        for part in (
            docs.short_description,
            docs.long_description,
            f"Returns: {returns.strip()}" if returns else None,
        )
        if part
    )
    target = _function_of(func)
    return CallableInfo(
        qualname=qualname,
        parameters=tuple(parameters),
        description=description,
        is_async=inspect.iscoroutinefunction(target),
    )


def resolve_signature(func: Callable[..., Any], info: CallableInfo) -> ResolvedSignature:
    """Resolve annotations and build the argument model and the schemas.

    Args:
        func: The function or bound method that ``info`` describes.
        info: What :func:`inspect_callable` read.

    Returns:
        The resolved signature.

    Raises:
        ToolDefinitionError: when an annotation names something that does not exist (the
            message names it), or when pydantic cannot build a schema for a type (the message
            names the parameter).
    """
    hints = _type_hints(func, info.qualname)
    fields: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    injected: dict[str, Injection] = {}
    for index, param in enumerate(info.parameters):
        annotation = hints.get(param.name, Any)
        injection = _injection(annotation)
        if injection is not None:
            injected[param.name] = injection
            continue
        field_name = f"p{index}"  # aliases carry the real names, so no name can clash
        field_names[param.name] = field_name
        fields[field_name] = _field(annotation, param)
    try:
        model = pydantic.create_model(
            f"{info.qualname.replace('.', '_').replace('<', '').replace('>', '')}_arguments",
            # Attribute docstrings of TypedDicts and dataclasses become property descriptions
            # (models keep their own config).
            __config__=ConfigDict(
                extra="forbid", arbitrary_types_allowed=False, use_attribute_docstrings=True
            ),
            **fields,
        )
        raw_schema = model.model_json_schema(by_alias=True)
    except _SCHEMA_ERRORS as error:
        culprit = _failing_parameter(fields, field_names)
        where = f" (parameter {culprit!r})" if culprit else ""
        raise ToolDefinitionError(
            f"tool {info.qualname!r}: cannot build the argument schema{where}: {error}",
            hint="use JSON-friendly types (str, int, list[...], dataclasses, pydantic models)",
            details={"tool": info.qualname, "parameter": culprit},
        ) from error
    input_schema = clean_schema(raw_schema)
    input_schema.setdefault("properties", {})
    input_schema["type"] = "object"
    output_schema, wrapped = _output_schema(hints.get("return", inspect.Signature.empty), info)
    return ResolvedSignature(
        model=model,
        field_names=field_names,
        injected=injected,
        input_schema=input_schema,
        output_schema=output_schema,
        output_wrapped=wrapped,
    )


_SCHEMA_ERRORS = (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError)


def _failing_parameter(fields: Mapping[str, Any], field_names: Mapping[str, str]) -> str | None:
    """The first parameter whose type alone has no JSON Schema (for the error message)."""
    for name, field_name in field_names.items():
        definition = fields[field_name]
        annotation = definition[0] if isinstance(definition, tuple) else definition
        try:
            TypeAdapter(annotation).json_schema()
        except _SCHEMA_ERRORS:
            return name
    return None


def _type_hints(func: Callable[..., Any], qualname: str) -> dict[str, Any]:
    target = inspect.unwrap(_function_of(func))  # a wraps() wrapper: the original's globals
    try:
        return typing.get_type_hints(target, include_extras=True)
    except NameError as error:
        missing = getattr(error, "name", None) or str(error)
        raise ToolDefinitionError(
            f"tool {qualname!r}: annotation names {missing!r}, which is not defined",
            hint=f"define or import {missing!r} in the tool's module before its schema is used",
            details={"tool": qualname, "name": missing},
        ) from error
    except (TypeError, AttributeError, SyntaxError) as error:
        raise ToolDefinitionError(
            f"tool {qualname!r}: cannot resolve its annotations: {error}",
            details={"tool": qualname},
        ) from error


def callable_qualname(func: Callable[..., Any]) -> str:
    """A name for ``func`` in messages: its ``__qualname__``, or that of what it wraps (a
    ``functools.partial``) or of its class (a callable instance)."""
    while isinstance(func, functools.partial):
        func = func.func
    name = getattr(func, "__qualname__", None)
    if isinstance(name, str):
        return name
    return f"{type(func).__qualname__}()"


_SECTION_TITLE = re.compile(
    r"(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Raises|Yields):"
)


def _docstring_text(func: Callable[..., Any]) -> str:
    """The docstring to parse: a partial's function's; a callable instance's ``__call__``'s,
    else its class's.

    ``inspect.getdoc`` dedents by the lines after the first, so a docstring that opens with a
    section title (a docstring of only ``Args:``) loses the indentation that makes its
    entries part of the section; it is put back.
    """
    while isinstance(func, functools.partial):
        func = func.func
    target: Any = func
    if not (inspect.isfunction(func) or inspect.ismethod(func)) and callable(func):
        call = vars(type(func)).get("__call__")  # the class's own, not an inherited one
        own = inspect.isfunction(call) and bool(call.__doc__)  # getdoc would inherit type's
        target = call if own else type(func)
    text = inspect.getdoc(target) or ""
    first, _, rest = text.partition("\n")
    if not _SECTION_TITLE.fullmatch(first.strip()):
        return text
    lines = rest.split("\n")
    if all(not line[:1].isspace() for line in lines):
        rest = "\n".join(f"    {line}" if line else line for line in lines)
    # docstring-parser finds no section in a text that opens with the only section's title
    # (its Google parser then fails and the style falls back to reST): start on a new line.
    return f"\n{first}\n{rest}"


def _function_of(func: Callable[..., Any]) -> Any:
    """The plain function behind a function, bound method, partial or callable instance."""
    while isinstance(func, functools.partial):
        func = func.func
    target = getattr(func, "__func__", func)
    if not inspect.isfunction(target) and callable(target):
        call = type(target).__call__
        if inspect.isfunction(call):
            return call
    return target


def _injection(annotation: Any) -> Injection | None:
    if annotation is SessionContext:
        return SessionContext
    origin = get_origin(annotation)
    if origin is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, InjectedArg):
                return meta
        return _injection(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if members == [SessionContext]:
            return SessionContext
    return None


def _field(annotation: Any, param: ParameterInfo) -> Any:
    """A ``create_model`` field definition with the parameter's alias and description."""
    description = param.description
    base: Any = annotation
    metadata: tuple[Any, ...] = ()
    if get_origin(annotation) is Annotated:
        base, metadata = get_args(annotation)[0], annotation.__metadata__
    plain = [m for m in metadata if isinstance(m, str)]
    if plain:  # Annotated[str, "a plain description"]: the annotation's own words win
        description = " ".join(plain)
    kept = tuple(m for m in metadata if not isinstance(m, str))
    # The docstring's description goes first, so that an explicit Field(description=...) wins.
    first = Field(alias=param.name, description=description)
    typed = Annotated[(base, first, *kept, Field(alias=param.name))]
    if param.default is inspect.Parameter.empty:
        return typed  # required, unless an Annotated Field(default=...) says otherwise
    return (typed, param.default)


def _output_schema(annotation: Any, info: CallableInfo) -> tuple[dict[str, Any] | None, bool]:
    base = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    if any(base is u for u in _UNSTRUCTURED_RETURNS):
        return None, False
    try:
        schema = clean_schema(TypeAdapter(annotation).json_schema(mode="serialization"))
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as error:
        raise ToolDefinitionError(
            f"tool {info.qualname!r}: cannot build the output schema: {error}",
            hint="annotate the return with a JSON-friendly type, or leave it unannotated",
            details={"tool": info.qualname},
        ) from error
    root = schema
    if isinstance(schema.get("$ref"), str) and len(schema) <= 2:
        try:
            root = resolve_local_ref(schema, schema["$ref"])
        except KeyError:
            root = schema
    if isinstance(root, dict) and root.get("type") == "object":
        return schema, False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
    }
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True

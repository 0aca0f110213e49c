"""Export tools as Anthropic Messages tools, and read ``tool_use`` blocks back.

A tool is ``{"name", "description", "input_schema"}`` (Anthropic API reference, Messages ->
``tools``; "Tool use", https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview).
Names follow ``^[a-zA-Z0-9_-]{1,64}$``, the same rule and mapping as the OpenAI export
(:mod:`sagents.tool.naming`).

* **Faithful** (default): ``input_schema`` is :func:`~sagents.tool._export_faithful.faithful_schema`
  (the API takes JSON Schema 2020-12 with a root ``type: object``).
* **Strict** (``"strict": true``, Anthropic's "Structured outputs" / strict tool use, section
  "JSON Schema limitations", https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs):
  every ``$ref`` is inlined (:mod:`sagents.tool.export_inline`; recursive schemas are not
  supported there), every object gets ``additionalProperties: false``, ``oneOf`` becomes
  ``anyOf``, and what the subset lacks (numeric and length bounds, ``minItems`` above 1,
  ``maxItems``, ``uniqueItems``, other string formats, ``not``, ...) is removed and written
  into the ``description``. Optional properties stay optional (the subset allows them), so
  ``run_tool`` needs no ``strict=True`` for these calls. Refused with
  :class:`~sagents.errors.SchemaExportError` (``get_anthropic_tools(strict=True)`` falls back
  to the faithful export for that tool, with a warning): a value of any type, an open map, a
  union of argument objects at the root, an object that allows other properties beside its
  own, ``patternProperties``, an ``enum`` of arrays or objects, a recursive ``$ref``. The
  API's own limits per request (20 strict tools, 24 optional parameters, 16 union-typed
  parameters) are left to the caller.

The strict schema accepts every input the original accepts, unknown properties aside (strict
objects are closed); arguments are validated against the original in ``run_tool``.

The model's call is a ``tool_use`` content block (``id``, ``name``, ``input``); the answer is a
``tool_result`` block with the same ``tool_use_id``, in the next user message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sagents.core._result import ImageContent, ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SchemaExportError
from sagents.tool._examples import tool_examples
from sagents.tool._export_calls import ModelToolCall, call_arguments, field_of, resolve_call_name
from sagents.tool._export_faithful import faithful_schema
from sagents.tool._json_schema import escape_pointer, fixed_length
from sagents.tool._provider import ToolProvider
from sagents.tool.export_inline import distribute_unions, inline_schema
from sagents.tool.naming import to_exported_name

__all__ = [
    "ANTHROPIC_STRICT_FORMATS",
    "ANTHROPIC_STRICT_KEYWORDS",
    "anthropic_strict_schema",
    "anthropic_tool_result",
    "parse_anthropic_tool_use",
    "parse_anthropic_tool_uses",
    "to_anthropic_tool",
]

ANTHROPIC_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "description",
        "default",
        "format",
        "pattern",
        "minItems",
    }
)
"""Keywords Anthropic's strict mode supports (``$ref``/``$defs``/``allOf`` are inlined first)."""

ANTHROPIC_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
"""String formats Anthropic's strict mode supports; others are written into the description."""

_SILENT = frozenset(
    {"title", "$schema", "$id", "$comment", "$anchor", "readOnly", "writeOnly", "examples"}
)
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_TYPE_KEYS = ("type", "properties", "items", "enum", "const", "anyOf", "oneOf", "prefixItems")


def anthropic_strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten for Anthropic's strict tool use (rules: module docstring).

    Raises:
        SchemaExportError: when strict mode cannot express the schema (``details["path"]``).
    """
    target = "Anthropic strict mode"
    document = distribute_unions(
        inline_schema(faithful_schema(schema), target=target), target=target
    )
    try:
        return _strict(document, "")
    except RecursionError:
        raise SchemaExportError(
            "the schema is nested too deeply to export", details={"path": ""}
        ) from None


def to_anthropic_tool(
    spec: ToolSpec, *, strict: bool = False, name: str | None = None
) -> dict[str, Any]:
    """The Anthropic Messages tool for ``spec``.

    Args:
        spec: The tool.
        strict: Anthropic's strict tool use (:func:`anthropic_strict_schema`, ``"strict":
            true``); otherwise the faithful schema.
        name: The tool's name for the model; :func:`~sagents.tool.naming.to_exported_name` by
            default.

    Returns:
        ``{"name", "description", "input_schema"[, "strict": true][, "input_examples"]}``:
        ``input_examples`` when the tool has examples (:mod:`sagents.tool._examples`).

    Raises:
        SchemaExportError: when the schema cannot be exported in the asked mode.
    """
    tool: dict[str, Any] = {
        "name": name if name is not None else to_exported_name(spec.name),
        "description": spec.description,
    }
    if strict:
        tool["input_schema"] = anthropic_strict_schema(spec.input_schema)
        tool["strict"] = True
    else:
        tool["input_schema"] = faithful_schema(spec.input_schema)
    examples = tool_examples(spec)
    if examples:
        tool["input_examples"] = examples
    return tool


def parse_anthropic_tool_use(block: Any, provider: ToolProvider | None = None) -> ModelToolCall:
    """An Anthropic ``tool_use`` content block as a call to pass to ``run_tool``.

    Args:
        block: The block: a JSON dict or an ``anthropic`` SDK ``ToolUseBlock``.
        provider: Maps the tool's name back to the registered name.

    Raises:
        ValueError: when ``block`` is not a ``tool_use`` block with an id and a name.
    """
    kind, name, block_id = (field_of(block, key) for key in ("type", "name", "id"))
    if kind != "tool_use" or not isinstance(name, str) or not isinstance(block_id, str):
        raise ValueError(f"expected an Anthropic tool_use block with id and name, got {kind!r}")
    arguments = field_of(block, "input")
    return ModelToolCall(
        name=resolve_call_name(name, provider, to_exported_name),
        arguments=call_arguments(arguments),
        tool_call_id=block_id,
        sent_name=name,
    )


def parse_anthropic_tool_uses(
    content: Iterable[Any], provider: ToolProvider | None = None
) -> list[ModelToolCall]:
    """Every ``tool_use`` block of a message's ``content``, in order (other blocks skipped)."""
    return [
        parse_anthropic_tool_use(block, provider)
        for block in content
        if field_of(block, "type") == "tool_use"
    ]


def anthropic_tool_result(
    call: ModelToolCall, result: ToolResult, *, max_tokens: int | None = None
) -> dict[str, Any]:
    """The ``tool_result`` block that answers ``call`` with ``result``.

    ``content`` is the model-facing text of the result
    (:meth:`~sagents.core._result.ToolResult.to_tool_message`); a result with images (JPEG,
    PNG, GIF, WebP: the types the API takes) also carries them as base64 ``image`` blocks.
    ``is_error`` follows the result.

    Raises:
        ValueError: when ``call`` has no ``tool_call_id`` (the API needs the ``tool_use_id``).
    """
    if not call.tool_call_id:
        raise ValueError("a tool_result needs the tool_use block's id")
    text = result.to_tool_message(max_tokens)
    images = [
        b for b in result.content if isinstance(b, ImageContent) and b.mime_type in _IMAGE_TYPES
    ]
    content: str | list[dict[str, Any]] = text
    if images:
        content = [{"type": "text", "text": text}]
        content += [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": b.mime_type, "data": b.data},
            }
            for b in images
        ]
    return {
        "type": "tool_result",
        "tool_use_id": call.tool_call_id,
        "content": content,
        "is_error": result.is_error,
    }


def _refuse(message: str, path: str) -> SchemaExportError:
    return SchemaExportError(
        f"the schema at {path or '/'!r} {message}, which Anthropic strict mode cannot express",
        hint="give it a concrete shape, or export this tool with strict=False",
        details={"path": path},
    )


def _strict(node: Any, path: str) -> dict[str, Any]:
    if not isinstance(node, Mapping) or not any(k in node for k in _TYPE_KEYS):
        raise _refuse("accepts a value of any type", path)
    node = dict(node)
    if "oneOf" in node:
        node["anyOf"] = [*node.pop("oneOf"), *node.get("anyOf", [])]
    if isinstance(node.get("anyOf"), list) and not path:
        raise _refuse("is an anyOf of argument objects at its root", path)
    out: dict[str, Any] = {}
    notes: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SILENT:
            continue
        unsupported_format = key == "format" and value not in ANTHROPIC_STRICT_FORMATS
        if unsupported_format or (key == "minItems" and value not in (0, 1)):
            notes[key] = value
        elif key in ANTHROPIC_STRICT_KEYWORDS:
            out[key] = value
        elif key not in ("prefixItems", "additionalItems", "patternProperties"):
            notes[key] = value
    for values in (out.get("enum"), [out["const"]] if "const" in out else None):
        if values is not None and any(isinstance(v, list | dict) for v in values):
            raise _refuse("has an enum or const of arrays or objects", path)
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_strict(b, f"{path}/anyOf/{i}") for i, b in enumerate(out["anyOf"])]
    if _has_type(out, "array") or "items" in node or "prefixItems" in node:
        _array(node, out, path, notes)
    if _has_type(out, "object") or "properties" in node:
        _object(node, out, path)
    if notes:
        text = "; ".join(
            f"{k}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}" for k, v in notes.items()
        )
        description = out.get("description")
        out["description"] = f"{description} ({text})" if description else f"({text})"
    return out


def _array(node: Mapping[str, Any], out: dict[str, Any], path: str, notes: dict[str, Any]) -> None:
    prefix, tail = node.get("prefixItems"), node.get("items")
    if isinstance(tail, list):  # draft-07 tuple form
        prefix, tail = tail, node.get("additionalItems")
    if isinstance(prefix, list) and prefix and fixed_length(node, len(prefix)):
        tail = False  # pydantic's tuple[int, str]: maxItems leaves no room past the prefix
    if isinstance(prefix, list) and prefix:
        members = [*prefix, *([tail] if isinstance(tail, Mapping) and tail else [])]
        if tail is None or tail is True or tail == {}:
            raise _refuse("is a tuple whose extra items may be of any type", path)
        if tail is False:
            notes["maxItems"] = len(prefix)
        notes["prefixItems"] = prefix  # the item types in their order
        items = members[0] if len(members) == 1 else {"anyOf": members}
        out["items"] = _strict(items, f"{path}/prefixItems")
        out.setdefault("type", "array")
        return
    out["items"] = _strict(tail if tail is not None else {}, f"{path}/items")
    out.setdefault("type", "array")


def _object(node: Mapping[str, Any], out: dict[str, Any], path: str) -> None:
    properties = node.get("properties") or {}
    extra = node.get("additionalProperties")
    if node.get("patternProperties"):
        raise _refuse("has patternProperties", path)
    if extra is not None and extra is not False:
        what = "is an open map" if not properties else "allows other properties"
        raise _refuse(what, path)
    if not properties and path and extra is None:
        raise _refuse("is an object with no fixed properties (an open map)", path)
    out["properties"] = {
        name: _strict(sub, f"{path}/properties/{escape_pointer(name)}")
        for name, sub in properties.items()
    }
    required = [r for r in node.get("required") or () if r in properties]
    if len(required) != len(node.get("required") or ()):
        raise _refuse("requires a property it does not declare", path)
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
    out["additionalProperties"] = False
    out.setdefault("type", "object")  # object keywords without a type: read as an object


def _has_type(node: Mapping[str, Any], name: str) -> bool:
    types_ = node.get("type")
    return types_ == name or (isinstance(types_, list) and name in types_)

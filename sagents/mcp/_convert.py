"""Conversions between MCP's wire types and sagents' values.

- Tool names: ``<server>__<tool>`` (docs/mcp.md, "Tools"); server names that would make the
  split ambiguous are refused.
- Tools: an MCP ``Tool`` becomes a :class:`~sagents.core.ToolSpec` with the full
  ``inputSchema`` kept, ``outputSchema``, annotations and a permission class (MCP spec
  2025-11-25, "Tools"); a tool whose input schema cannot be used raises
  :class:`~sagents.errors.UpstreamSchemaError` so that the caller withholds only that tool.
- Results: a ``CallToolResult`` becomes a :class:`~sagents.core.ToolResult` without loss (text,
  image, audio, resource link, embedded resource, ``structuredContent``, ``isError``, ``_meta``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import mcp_types as types
from jsonschema import SchemaError
from jsonschema.validators import validator_for
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from sagents.core._permissions import PermissionClass, ToolAnnotations, classify_annotations
from sagents.core._result import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from sagents.core._spec import MAX_SCHEMA_NESTING, ToolSource, ToolSpec, schema_nesting
from sagents.errors import UpstreamSchemaError
from sagents.mcp._settings import ServerSettings

__all__ = [
    "TOOL_NAME_SEPARATOR",
    "check_input_schema",
    "check_server_name",
    "convert_content_block",
    "convert_result",
    "mcp_tool_name",
    "split_tool_name",
    "tool_to_spec",
]

TOOL_NAME_SEPARATOR = "__"
_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")


def check_server_name(name: str) -> None:
    """Refuse a server name that would make ``<server>__<tool>`` ambiguous or unexportable.

    A valid name starts with a letter or digit, holds only letters, digits, ``-`` and single
    ``_``, does not end with ``_``, and is at most 40 characters long.

    Raises:
        ValueError: naming the server and the rule it breaks.
    """
    if not _SERVER_NAME.match(name) or name.endswith("_") or len(name) > 40:
        raise ValueError(
            f"invalid MCP server name {name!r}: use 1-40 letters, digits, '-' and single '_' "
            f"(no {TOOL_NAME_SEPARATOR!r}, no leading or trailing '_'), since tools are named "
            f"'<server>{TOOL_NAME_SEPARATOR}<tool>'"
        )


def mcp_tool_name(server: str, tool: str) -> str:
    """The registered name of ``tool`` of ``server``: ``<server>__<tool>``."""
    return f"{server}{TOOL_NAME_SEPARATOR}{tool}"


def split_tool_name(name: str) -> tuple[str, str]:
    """Split a registered MCP tool name into ``(server, original tool name)``.

    Raises:
        ValueError: when ``name`` has no ``__``.
    """
    server, sep, tool = name.partition(TOOL_NAME_SEPARATOR)
    if not sep or not server or not tool:
        raise ValueError(
            f"{name!r} is not an MCP tool name ('<server>{TOOL_NAME_SEPARATOR}<tool>')"
        )
    return server, tool


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for key, value in node.items():
            if key in ("enum", "const", "default", "examples"):
                continue  # instance data, not subschemas
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def check_input_schema(schema: Any) -> None:
    """Check that an upstream ``inputSchema`` can be used for validation and export.

    Accepted: a valid JSON Schema (by its ``$schema``, default 2020-12) whose every ``$ref``
    resolves inside the document, and whose root describes an object (``type: "object"``, or no
    ``type`` at all, or a root ``$ref`` to an object schema).

    Raises:
        UpstreamSchemaError: with the reason (not a JSON Schema, unresolvable ``$ref``, root not
            an object).
    """
    if not isinstance(schema, dict):
        raise UpstreamSchemaError(f"inputSchema is a {type(schema).__name__}, not an object")
    if schema_nesting(schema) > MAX_SCHEMA_NESTING:
        raise UpstreamSchemaError(
            f"inputSchema nests objects and arrays more than {MAX_SCHEMA_NESTING} levels deep"
        )
    try:
        validator_for(schema, default=validator_for({})).check_schema(schema)
    except SchemaError as error:
        raise UpstreamSchemaError(
            f"inputSchema is not a valid JSON Schema: {error.message}"
        ) from None
    except RecursionError:
        raise UpstreamSchemaError("inputSchema is nested too deeply") from None
    resource = Resource.from_contents(schema, default_specification=DRAFT202012)
    resolver = Registry().with_resource("urn:sagents:input", resource).resolver("urn:sagents:input")
    root: Any = schema
    for ref in _refs(schema):
        try:
            resolved = resolver.lookup(ref)
        except Unresolvable:
            raise UpstreamSchemaError(f"inputSchema has an unresolvable $ref {ref!r}") from None
        if ref == schema.get("$ref"):
            root = resolved.contents
    root_type = root.get("type") if isinstance(root, dict) else None
    types_ = root_type if isinstance(root_type, list) else [root_type]
    if root_type is not None and "object" not in types_:
        raise UpstreamSchemaError(f"inputSchema root is of type {root_type!r}, not 'object'")


def _annotations(tool: types.Tool) -> ToolAnnotations | None:
    given = tool.annotations
    if given is None:
        return None
    return ToolAnnotations(
        title=given.title,
        read_only_hint=given.read_only_hint,
        destructive_hint=given.destructive_hint,
        idempotent_hint=given.idempotent_hint,
        open_world_hint=given.open_world_hint,
    )


def tool_to_spec(
    server: str, tool: types.Tool, settings: ServerSettings, *, protocol_version: str | None
) -> ToolSpec:
    """Build the spec of one upstream tool.

    The permission class is, in order: ``settings.tool_permissions[tool.name]``,
    ``settings.permission``, else :func:`~sagents.core.classify_annotations` of the tool's
    annotations (``execution.taskSupport`` counts only up to protocol 2025-11-25; the field does
    not exist in 2026-07-28).

    Raises:
        UpstreamSchemaError: the input schema cannot be used; ``details`` holds ``server``,
            ``tool`` and ``reason``.
    """
    try:
        check_input_schema(tool.input_schema)
    except UpstreamSchemaError as error:
        raise UpstreamSchemaError(
            f"tool {tool.name!r} of MCP server {server!r} is withheld: {error.message}",
            details={"server": server, "tool": tool.name, "reason": error.message},
        ) from None
    annotations = _annotations(tool)
    legacy = protocol_version not in MODERN_PROTOCOL_VERSIONS
    task_support = tool.execution.task_support if (legacy and tool.execution) else None
    permission: PermissionClass = (
        settings.tool_permissions.get(tool.name)
        or settings.permission
        or classify_annotations(annotations, task_support=task_support)
    )
    meta = dict(tool.meta or {})
    if tool.title:
        meta.setdefault("title", tool.title)
    return ToolSpec(
        name=mcp_tool_name(server, tool.name),
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations or ToolAnnotations(),
        permission=permission,
        source=ToolSource(kind="mcp", server=server, original_name=tool.name),
        meta=meta,
        timeout=settings.call_timeout if settings.call_timeout is not None else math.inf,
    )


def convert_content_block(block: types.ContentBlock) -> ContentBlock:
    """Convert one MCP content block to its sagents twin (same fields, snake_case)."""
    if isinstance(block, types.TextContent):
        return TextContent(text=block.text)
    if isinstance(block, types.ImageContent):
        return ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, types.AudioContent):
        return AudioContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, types.ResourceLink):
        return ResourceLink(
            uri=str(block.uri),
            name=block.name,
            title=block.title,
            description=block.description,
            mime_type=block.mime_type,
            size=block.size,
        )
    resource = block.resource
    if isinstance(resource, types.TextResourceContents):
        return EmbeddedResource(
            uri=str(resource.uri), mime_type=resource.mime_type, text=resource.text
        )
    return EmbeddedResource(uri=str(resource.uri), mime_type=resource.mime_type, blob=resource.blob)


def convert_result(result: types.CallToolResult) -> ToolResult:
    """Convert a ``CallToolResult`` without loss.

    ``structuredContent`` is kept as ``structured`` even when no text block carries it; an
    ``isError`` result with empty content stays an error with empty content (``error`` is None:
    the tool, not the layer, reported the failure).
    """
    meta: Mapping[str, Any] = dict(result.meta or {})
    return ToolResult(
        content=tuple(convert_content_block(b) for b in result.content),
        structured=result.structured_content,
        is_error=result.is_error,
        meta=meta,
    )

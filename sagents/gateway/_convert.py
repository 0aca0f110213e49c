"""Conversion between sagents values and MCP wire types, for the gateway's answers.

``ToolSpec`` -> MCP ``Tool`` (name, description, ``inputSchema``, ``outputSchema``, annotations,
``_meta``) and ``ToolResult`` -> MCP ``CallToolResult`` (content blocks, ``structuredContent``,
``isError``), without loss: every field of our values has a place on the wire (MCP spec
2025-11-25, "Tools"). A layer error (``ToolResult.error``) travels in the result's ``_meta``
under ``sagents/error`` beside its text block, so an MCP client sees the text and a sagents client
can rebuild the code.

The ``_meta`` of a result keeps every key but the 2026-07-28 ``serverInfo`` stamp
(``io.modelcontextprotocol/serverInfo``), which names the server that answered: the gateway's
own server stamps its answers, so a forwarded result must not carry its upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as mt

from sagents.core._result import (
    AudioContent,
    ContentBlock,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from sagents.core._secrets import Redactor
from sagents.core._spec import ToolSpec
from sagents.errors import UpstreamSchemaError

__all__ = [
    "ERROR_META_KEY",
    "check_servable",
    "redact_call_tool_result",
    "spec_to_mcp_tool",
    "to_call_tool_result",
    "to_mcp_content",
]

ERROR_META_KEY = "sagents/error"
"""``_meta`` key of a result that carries a layer error: ``{"code", "message", "hint"}``."""


def check_servable(spec: ToolSpec) -> None:
    """Check that :func:`spec_to_mcp_tool` can describe ``spec``, without building the tool
    (``tools/call`` checks this on every call: a tool withheld from the list is not callable).

    Raises:
        UpstreamSchemaError: as :func:`spec_to_mcp_tool`.
    """
    _check_object_root(spec.name, "inputSchema", spec.input_schema)
    if spec.output_schema:
        _check_object_root(spec.name, "outputSchema", spec.output_schema)


def spec_to_mcp_tool(spec: ToolSpec) -> mt.Tool:
    """Describe ``spec`` as an MCP ``Tool``.

    Annotation hints that were not given stay absent, so the client applies the spec's defaults,
    exactly as the upstream server meant. Schemas are deep-copied (specs are read-only). The MCP
    spec requires ``"type": "object"`` at the root of both schemas: a root without ``type`` gets
    it (JSON Schema of an arguments object); a root of another type cannot be served.

    Raises:
        UpstreamSchemaError: a schema's root ``type`` is not ``object``; the caller withholds
            this one tool and serves the others.
    """
    input_schema = _object_schema(spec.name, "inputSchema", dict(spec.input_schema))
    output_schema = (
        _object_schema(spec.name, "outputSchema", dict(spec.output_schema))
        if spec.output_schema
        else None
    )
    ann = spec.annotations
    hints = {
        "title": ann.title,
        "read_only_hint": ann.read_only_hint,
        "destructive_hint": ann.destructive_hint,
        "idempotent_hint": ann.idempotent_hint,
        "open_world_hint": ann.open_world_hint,
    }
    given = {key: value for key, value in hints.items() if value is not None}
    return mt.Tool(
        name=spec.name,
        description=spec.description or None,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=mt.ToolAnnotations(**given) if given else None,
        _meta=_copy_json(dict(spec.meta)) if spec.meta else None,
    )


def to_mcp_content(block: ContentBlock) -> mt.ContentBlock:
    """Convert one content block to its MCP type."""
    if isinstance(block, TextContent):
        return mt.TextContent(text=block.text)
    if isinstance(block, ImageContent):
        return mt.ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, AudioContent):
        return mt.AudioContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, ResourceLink):
        return mt.ResourceLink(
            uri=block.uri,
            name=block.name,
            title=block.title,
            description=block.description,
            mime_type=block.mime_type,
            size=block.size,
        )
    resource: mt.TextResourceContents | mt.BlobResourceContents
    if block.blob is not None:
        resource = mt.BlobResourceContents(
            uri=block.uri, mime_type=block.mime_type, blob=block.blob
        )
    else:
        resource = mt.TextResourceContents(
            uri=block.uri, mime_type=block.mime_type, text=block.text or ""
        )
    return mt.EmbeddedResource(resource=resource)


def to_call_tool_result(result: ToolResult) -> mt.CallToolResult:
    """Convert a ``ToolResult`` to an MCP ``CallToolResult``.

    ``isError`` with no content gets one text block naming the failure, since some clients crash
    on an empty error. The ``serverInfo`` stamp of ``_meta`` is left out (see the module
    docstring). The models are built by their validating constructors: pydantic-core
    validates these few fields faster than ``model_construct`` sets them in Python.
    """
    content = [to_mcp_content(block) for block in result.content]
    if result.is_error and not content:
        message = result.error.message if result.error else "the tool reported an error"
        content = [mt.TextContent(text=message)]
    meta: dict[str, Any] = (
        {
            key: _copy_any(value)
            for key, value in result.meta.items()
            if key != mt.SERVER_INFO_META_KEY
        }
        if result.meta
        else {}
    )
    if result.error is not None:
        meta[ERROR_META_KEY] = {
            "code": result.error.code,
            "message": result.error.message,
            "hint": result.error.hint,
        }
    return mt.CallToolResult(
        content=content,
        structured_content=result.structured,
        is_error=result.is_error,
        _meta=meta or None,
    )


def redact_call_tool_result(result: mt.CallToolResult, redactor: Redactor) -> mt.CallToolResult:
    """``result`` with the secrets redacted from its text blocks, embedded resources (a blob in
    the bytes it decodes to), ``structuredContent`` and ``_meta`` (docs/gateway.md,
    "Secrets"); the same object when nothing was."""
    content = [_redact_block(block, redactor) for block in result.content]
    structured = redactor.redact_json(result.structured_content)
    meta = redactor.redact_json(result.meta)
    if (
        structured is result.structured_content
        and meta is result.meta
        and all(a is b for a, b in zip(content, result.content, strict=True))
    ):
        return result
    return result.model_copy(
        update={"content": content, "structured_content": structured, "meta": meta}
    )


def _redact_block(block: mt.ContentBlock, redactor: Redactor) -> mt.ContentBlock:
    if isinstance(block, mt.TextContent):
        text = redactor.redact(block.text)
        return block if text is block.text else block.model_copy(update={"text": text})
    if isinstance(block, mt.EmbeddedResource):
        resource = _redact_resource(block.resource, redactor)
        if resource is block.resource:
            return block
        return block.model_copy(update={"resource": resource})
    return block


def _redact_resource(
    resource: mt.TextResourceContents | mt.BlobResourceContents, redactor: Redactor
) -> mt.TextResourceContents | mt.BlobResourceContents:
    if isinstance(resource, mt.TextResourceContents):
        text = redactor.redact(resource.text)
        return resource if text is resource.text else resource.model_copy(update={"text": text})
    blob = redactor.redact_base64(resource.blob)
    return resource if blob is resource.blob else resource.model_copy(update={"blob": blob})


def _object_schema(tool: str, field: str, schema: dict[str, Any]) -> dict[str, Any]:
    _check_object_root(tool, field, schema)
    copied = _copy_json(schema)
    copied.setdefault("type", "object")
    return copied


def _check_object_root(tool: str, field: str, schema: Mapping[str, Any]) -> None:
    root = schema.get("type", "object")
    if root != "object":
        raise UpstreamSchemaError(
            f"the {field} of tool {tool!r} has root type {root!r}; MCP requires 'object'",
            hint="fix the tool's schema; the gateway withholds this tool until then",
            details={"tool": tool, "field": field},
        )


def _copy_json(value: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON object (nested dicts and lists)."""
    copied: dict[str, Any] = {key: _copy_any(item) for key, item in value.items()}
    return copied


def _copy_any(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy_any(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_any(item) for item in value]
    return value

"""``ToolSpec``: what a tool is, independent of where it runs
(docs/architecture.md, "One tool call").

Shared by the tool core (local tools), the MCP layer (upstream tools) and the gateway. The schemas
are JSON Schema documents (dicts); treat them as read-only: exporters work on copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sagents.core._permissions import PermissionClass, ToolAnnotations

__all__ = ["MAX_SCHEMA_NESTING", "ToolSource", "ToolSourceKind", "ToolSpec", "schema_nesting"]

MAX_SCHEMA_NESTING = 128
"""Deepest nesting of JSON objects and arrays a tool's input schema may have. Python's JSON
Schema tools recurse per level and fail near 300; real schemas stay under 20 (pydantic moves
nested models to ``$defs``), so a deeper one is refused before anything recurses into it."""


def schema_nesting(value: Any, limit: int = MAX_SCHEMA_NESTING) -> int:
    """How deeply JSON objects and arrays nest in ``value`` (``{}`` is 1), counted without
    recursion and up to ``limit + 1`` (deeper is not explored)."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if depth <= limit:
            pending.extend((child, depth + 1) for child in children)
    return deepest


ToolSourceKind = Literal["local", "builtin", "mcp"]


@dataclass(frozen=True, kw_only=True)
class ToolSource:
    """Where a tool comes from.

    Attributes:
        kind: ``local`` (a Python function the application registered), ``builtin`` (sagents'
            own tools in ``sagents.tool.impl``) or ``mcp`` (a tool of an MCP server).
        server: The MCP server's registered name, for ``mcp``.
        original_name: The tool's name on the server (before ``<server>__`` is prepended).
    """

    kind: ToolSourceKind = "local"
    server: str | None = None
    original_name: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool's description, as a model and a policy see it.

    Attributes:
        name: The registered name (a local tool's own name; ``<server>__<tool>`` for MCP).
        description: What the tool does, for the model.
        input_schema: JSON Schema of the arguments object (root ``type: object``), without the
            parameters the host injects.
        output_schema: JSON Schema of the structured result, or None.
        annotations: MCP-style behaviour hints.
        permission: The permission class (see :mod:`sagents.core._permissions`).
        source: Where the tool comes from.
        meta: Extra JSON-serialisable data (for example an MCP tool's ``_meta``).
        timeout: Seconds a call of this tool may take when the caller gives no timeout (for an
            MCP tool, its server's ``call_timeout``; ``math.inf``: no limit); None leaves it to
            the registry's default.
    """

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    output_schema: Mapping[str, Any] | None = None
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)
    permission: PermissionClass = "write"
    source: ToolSource = field(default_factory=ToolSource)
    meta: Mapping[str, Any] = field(default_factory=dict)
    timeout: float | None = None

    @property
    def summary(self) -> str:
        """The first line of the description (for listings and prompts)."""
        return self.description.strip().splitlines()[0] if self.description.strip() else ""

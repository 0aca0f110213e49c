"""A minimal MCP → sagents bridge for the fleet example and its benchmark.

Stand-in until the tool core and MCP layer are merged: there, ``ToolManager.register_mcp_server``
builds the specs and ``ToolProxy.run_tool`` is the ``call_tool`` seam. Here, one ``mcp.Client``
session serves every call, and results are converted by hand (text and structured content only).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent, Tool

from sagents.core import TextContent as SagentsText
from sagents.core import ToolAnnotations, ToolResult, ToolSource, ToolSpec, classify_annotations
from sagents.script import CallTool

__all__ = ["HERE", "fleet_client", "make_call_tool", "result_from_mcp", "spec_from_mcp"]

HERE = Path(__file__).resolve().parent


def fleet_client() -> Client:
    """A client that starts the fleet server over stdio with this interpreter."""
    return Client(
        StdioServerParameters(command=sys.executable, args=[str(HERE / "fleet_server.py")])
    )


def spec_from_mcp(tool: Tool, server: str) -> ToolSpec:
    """A ToolSpec named ``<server>__<tool>``, its permission class from the annotations."""
    hints = tool.annotations
    annotations = ToolAnnotations(
        read_only_hint=hints.read_only_hint if hints else None,
        destructive_hint=hints.destructive_hint if hints else None,
    )
    return ToolSpec(
        name=f"{server}__{tool.name}",
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations,
        permission=classify_annotations(annotations),
        source=ToolSource(kind="mcp", server=server, original_name=tool.name),
    )


def result_from_mcp(result: CallToolResult) -> ToolResult:
    """Text blocks and structured content of an MCP result."""
    blocks = tuple(
        SagentsText(text=block.text) for block in result.content if isinstance(block, TextContent)
    )
    return ToolResult(
        content=blocks, structured=result.structured_content, is_error=result.is_error
    )


def make_call_tool(client: Client, server: str) -> CallTool:
    """The ``call_tool`` seam over one client session."""
    prefix = f"{server}__"

    async def call_tool(name: str, arguments: dict[str, Any]) -> ToolResult:
        if not name.startswith(prefix):
            return ToolResult.from_error("unknown_tool", f"no tool {name!r}")
        return result_from_mcp(await client.call_tool(name[len(prefix) :], arguments))

    return call_tool

"""One MCP server (official SDK, low-level ``Server``) for a set of built-in tools.

The server lists the tools' own specs (the same schemas as in process) and runs each call
through a private :class:`~sagents.tool.ToolManager` with a fixed
:class:`~sagents.tool.SessionContext`: the identity (user, agent, session) comes from the
server's command line, because a stdio server has exactly one client.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from sagents import __version__
from sagents.gateway._convert import spec_to_mcp_tool, to_call_tool_result
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import BuiltinTools

__all__ = ["builtin_server", "identity_arguments", "serve_stdio"]


def builtin_server(
    name: str, tools: BuiltinTools, names: Sequence[str], context: SessionContext
) -> Server[Any]:
    """A low-level MCP ``Server`` offering built-in tools ``names`` for one ``context``."""
    manager = ToolManager()
    tools.register(manager, names=names)
    specs = [tools.spec(tool) for tool in names]

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=[spec_to_mcp_tool(spec) for spec in specs])

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        result = await manager.run_tool(params.name, dict(params.arguments or {}), context)
        return to_call_tool_result(result)

    return Server(
        name,
        version=__version__,
        instructions=f"sagents built-in tools: {', '.join(names)}",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def identity_arguments(parser: argparse.ArgumentParser) -> None:
    """``--db``, ``--user``, ``--agent``, ``--session``, shared by the built-in servers."""
    parser.add_argument("--db", help="the SQLite file (default: in the sagents data directory)")
    parser.add_argument("--user", help="the user whose data this server serves")
    parser.add_argument("--agent", help="the agent name (memory scope, todo owner)")
    parser.add_argument(
        "--session",
        default="default",
        help="the session id (one todo list per session; default: 'default')",
    )

"""MCP servers that ship with sagents, on the official SDK (floor 6; docs/builtin_tools.md).

``python -m sagents.mcp_servers.memory`` serves ``memory_store``, ``memory_search`` and
``memory_delete``; ``python -m sagents.mcp_servers.todo`` serves ``todo_write`` and
``todo_read``. Both run the same stores and tool code as the built-in tools, over stdio, so any
MCP client (and an ``mcpServers`` entry of our own config) can use them.
"""

from sagents.mcp_servers._serve import builtin_server, serve_stdio

__all__ = ["builtin_server", "serve_stdio"]

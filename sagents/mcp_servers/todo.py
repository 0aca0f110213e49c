"""``python -m sagents.mcp_servers.todo``: the session task list as an MCP server (stdio).

Serves ``todo_write`` and ``todo_read`` on the same store as the built-in tools
(docs/builtin_tools.md). The list is the one of ``--session`` (``default`` unless given, so it
survives a restart of the server); ``--agent`` owns the items it creates; the database is
``--db``, else ``<data dir>/todo.sqlite3``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import anyio

from sagents.mcp_servers._serve import builtin_server, identity_arguments, serve_stdio
from sagents.tool import SessionContext
from sagents.tool.impl import BuiltinTools, TodoStore

__all__ = ["TOOLS", "main"]

TOOLS = ("todo_write", "todo_read")


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until the client disconnects."""
    parser = argparse.ArgumentParser(prog="python -m sagents.mcp_servers.todo")
    identity_arguments(parser)
    args = parser.parse_args(argv)
    store = TodoStore(path=Path(args.db)) if args.db else TodoStore()
    context = SessionContext(session_id=args.session, user_id=args.user, agent=args.agent)
    server = builtin_server("sagents-todo", BuiltinTools(None, todo=store), TOOLS, context)
    anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()

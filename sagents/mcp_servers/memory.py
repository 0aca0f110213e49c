"""``python -m sagents.mcp_servers.memory``: long-term memory as an MCP server (stdio).

Serves ``memory_store``, ``memory_search`` and ``memory_delete`` on the same store as the
built-in tools (docs/builtin_tools.md). The user is ``--user``, else ``$SAGENTS_MEMORY_USER``,
else the operating-system user running the server; the database is ``--db`` (its audit beside
it, ``audit.sqlite3``), else ``<data dir>/memory.sqlite3`` and the default audit store.
"""

from __future__ import annotations

import argparse
import getpass
import os
from collections.abc import Sequence
from pathlib import Path

import anyio

from sagents.audit import SqliteAuditStore
from sagents.audit._store import AUDIT_FILE
from sagents.mcp_servers._serve import builtin_server, identity_arguments, serve_stdio
from sagents.tool import SessionContext
from sagents.tool.impl import BuiltinTools, MemoryStore

__all__ = ["TOOLS", "main"]

TOOLS = ("memory_store", "memory_search", "memory_delete")


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until the client disconnects."""
    parser = argparse.ArgumentParser(prog="python -m sagents.mcp_servers.memory")
    identity_arguments(parser)
    args = parser.parse_args(argv)
    user = args.user or os.environ.get("SAGENTS_MEMORY_USER") or getpass.getuser()
    if args.db:  # the audit goes beside an explicit database
        db = Path(args.db)
        store = MemoryStore(path=db, audit=SqliteAuditStore(path=db.parent / AUDIT_FILE))
    else:
        store = MemoryStore()
    context = SessionContext(session_id=args.session, user_id=user, agent=args.agent)
    server = builtin_server("sagents-memory", BuiltinTools(None, memory=store), TOOLS, context)
    anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()

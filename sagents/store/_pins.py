"""Pinned tool definitions: what each upstream tool looked like when it was first seen or last
accepted (docs/gateway.md, "Pinned definitions").

A definition is the canonical JSON text of a tool's name, title, description, input and output
schema and annotations (``sagents.mcp._pins`` builds it); the store keeps, per server and tool,
the accepted definition with its SHA-256 digest and, when the server later offered another one,
that offered definition until an operator accepts it. :class:`SqlitePins` is the embedded store
(a SQLite file in the data directory); ``sagents.store._postgres_records.PostgresPins`` the
shared one.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio

from sagents.audit._store import BUSY_TIMEOUT_S, Paced, connect_private, sqlite_store_error

__all__ = ["PINS_FILE", "SqlitePins", "ToolPin", "definition_digest"]

PINS_FILE = "pins.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_pins (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    definition TEXT NOT NULL,
    digest TEXT NOT NULL,
    offered TEXT,
    offered_digest TEXT,
    updated REAL NOT NULL,
    PRIMARY KEY (server, tool)
)
"""
_T = TypeVar("_T")
_COLUMNS = "server, tool, definition, digest, offered, offered_digest"


def sqlite_transaction(
    path: Path, schema: str, busy_timeout_s: float, work: Callable[[Paced], _T]
) -> _T:
    """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction on a new connection to ``path``
    (``schema`` created first), committed if it returns and rolled back if it raises.

    Raises:
        StoreError: the file cannot be opened or is not a SQLite database, or a statement
            failed.
    """
    try:
        connection = connect_private(path)
    except (sqlite3.Error, OSError) as error:
        raise sqlite_store_error(path, error) from error
    try:
        connection.isolation_level = None  # transactions are explicit
        db = Paced(connection, busy_timeout_s)
        db.execute(schema)
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
            db.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.rollback()
            raise
        return result
    except sqlite3.Error as error:
        raise sqlite_store_error(path, error) from error
    finally:
        connection.close()


def definition_digest(definition: str) -> str:
    """The digest a definition is pinned by: SHA-256 of its UTF-8 text, hex."""
    return hashlib.sha256(definition.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class ToolPin:
    """One upstream tool's pinned definition.

    Attributes:
        server: The server's configured name.
        tool: The tool's name on the server.
        definition: The accepted definition (canonical JSON text).
        digest: Its :func:`definition_digest`.
        offered: A different definition the server offered since, not accepted yet (None:
            the server offers the accepted one).
        offered_digest: Its digest, or None.
    """

    server: str
    tool: str
    definition: str
    digest: str
    offered: str | None = None
    offered_digest: str | None = None

    @property
    def changed(self) -> bool:
        """Whether the server offers a definition other than the accepted one."""
        return self.offered is not None


def pin_of(row: tuple[Any, ...]) -> ToolPin:
    """A :class:`ToolPin` from a row of ``server, tool, definition, digest, offered,
    offered_digest`` (both backends select these columns)."""
    server, tool, definition, digest, offered, offered_digest = row
    return ToolPin(
        server=server,
        tool=tool,
        definition=definition,
        digest=digest,
        offered=offered,
        offered_digest=offered_digest,
    )


class SqlitePins:
    """The embedded :class:`~sagents.store._protocols.PinStore`: one SQLite file, each call in
    a worker thread on a connection of its own (pins change once per tool listing, not per
    call).

    Args:
        path: The database file (created 0600 with its folder on first use).
        busy_timeout_s: Seconds one call waits, in all, for a lock another process holds.
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
        self._busy_timeout_s = busy_timeout_s

    def _transaction(self, work: Callable[[Paced], _T]) -> _T:
        return sqlite_transaction(self.path, _SCHEMA, self._busy_timeout_s, work)

    def check(self) -> None:
        """Open the database (created if missing) and check that it is one.

        Raises:
            StoreError: the file is not a SQLite database, or cannot be used now.
        """
        self._transaction(lambda db: db.execute("SELECT count(*) FROM tool_pins").fetchone())

    async def observe(self, server: str, definitions: Mapping[str, str]) -> dict[str, ToolPin]:
        """See :meth:`sagents.store._protocols.PinStore.observe`."""
        return await anyio.to_thread.run_sync(
            partial(self._transaction, partial(_observe, server, dict(definitions)))
        )

    async def changes(self) -> list[ToolPin]:
        """See :meth:`sagents.store._protocols.PinStore.changes`."""
        return await anyio.to_thread.run_sync(partial(self._transaction, _changes))

    async def accept(
        self, server: str, tool: str | None = None, *, offered_digest: str | None = None
    ) -> list[ToolPin]:
        """See :meth:`sagents.store._protocols.PinStore.accept`."""
        return await anyio.to_thread.run_sync(
            partial(self._transaction, partial(_accept, server, tool, offered_digest))
        )


def _observe(server: str, definitions: dict[str, str], db: Paced) -> dict[str, ToolPin]:
    now = time.time()
    pins: dict[str, ToolPin] = {}
    for tool, definition in definitions.items():
        digest = definition_digest(definition)
        db.execute(
            "INSERT INTO tool_pins (server, tool, definition, digest, updated) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (server, tool) DO NOTHING",
            (server, tool, definition, digest, now),
        )
        db.execute(
            "UPDATE tool_pins SET offered = CASE WHEN digest = ? THEN NULL ELSE ? END, "
            "offered_digest = CASE WHEN digest = ? THEN NULL ELSE ? END, updated = ? "
            "WHERE server = ? AND tool = ?",
            (digest, definition, digest, digest, now, server, tool),
        )
        row = db.execute(
            f"SELECT {_COLUMNS} FROM tool_pins WHERE server = ? AND tool = ?", (server, tool)
        ).fetchone()
        pins[tool] = pin_of(row)
    return pins


def _changes(db: Paced) -> list[ToolPin]:
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM tool_pins WHERE offered IS NOT NULL ORDER BY server, tool"
    ).fetchall()
    return [pin_of(row) for row in rows]


def _accept(server: str, tool: str | None, offered_digest: str | None, db: Paced) -> list[ToolPin]:
    where, params = "server = ? AND offered IS NOT NULL", [server]
    if tool is not None:
        where += " AND tool = ?"
        params.append(tool)
    if offered_digest is not None:
        where += " AND offered_digest = ?"
        params.append(offered_digest)
    rows = db.execute(
        "UPDATE tool_pins SET definition = offered, digest = offered_digest, offered = NULL, "
        f"offered_digest = NULL, updated = ? WHERE {where} RETURNING {_COLUMNS}",
        (time.time(), *params),
    ).fetchall()
    return sorted((pin_of(row) for row in rows), key=lambda pin: pin.tool)

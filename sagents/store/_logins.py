"""Upstream logins: the OAuth tokens a gateway holds for each upstream server and principal
(docs/oauth.md, "Upstream servers that need a login").

The store keeps each login as an opaque sealed blob (``sagents.mcp._oauth`` encrypts it with
the key of ``SAGENTS_SECRET_KEY`` before it gets here, and decrypts what it reads back), so
neither the SQLite file nor the database ever holds a token in the clear. :class:`SqliteLogins`
is the embedded store (a SQLite file in the data directory);
``sagents.store._postgres_records.PostgresLogins`` the shared one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio

from sagents.audit._store import BUSY_TIMEOUT_S, Paced
from sagents.store._pins import sqlite_transaction

__all__ = ["LOGINS_FILE", "SealedLogin", "SqliteLogins"]

LOGINS_FILE = "logins.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS upstream_logins (
    server TEXT NOT NULL,
    principal TEXT NOT NULL,
    sealed BLOB NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (server, principal)
)
"""
_T = TypeVar("_T")


@dataclass(frozen=True)
class SealedLogin:
    """One stored login: whose, for which server, and its encrypted record."""

    server: str
    principal: str
    sealed: bytes
    updated: float


class SqliteLogins:
    """The embedded :class:`~sagents.store._protocols.LoginStore`: one SQLite file, each call
    in a worker thread on a connection of its own.

    Args:
        path: The database file (created 0600 with its folder on first use).
        busy_timeout_s: Seconds one call waits, in all, for a lock another process holds.
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
        self._busy_timeout_s = busy_timeout_s

    def _transaction(self, work: Callable[[Paced], _T]) -> _T:
        return sqlite_transaction(self.path, _SCHEMA, self._busy_timeout_s, work)

    async def load(self, server: str, principal: str) -> bytes | None:
        """See :meth:`sagents.store._protocols.LoginStore.load`."""

        def work(db: Paced) -> bytes | None:
            row = db.execute(
                "SELECT sealed FROM upstream_logins WHERE server = ? AND principal = ?",
                (server, principal),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await anyio.to_thread.run_sync(partial(self._transaction, work))

    async def save(self, server: str, principal: str, sealed: bytes) -> None:
        """See :meth:`sagents.store._protocols.LoginStore.save`."""

        def work(db: Paced) -> None:
            db.execute(
                "INSERT INTO upstream_logins (server, principal, sealed, updated) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (server, principal) DO UPDATE SET "
                "sealed = excluded.sealed, updated = excluded.updated",
                (server, principal, sealed, time.time()),
            )

        await anyio.to_thread.run_sync(partial(self._transaction, work))

    async def delete(self, server: str, principal: str) -> bool:
        """See :meth:`sagents.store._protocols.LoginStore.delete`."""

        def work(db: Paced) -> bool:
            cursor = db.execute(
                "DELETE FROM upstream_logins WHERE server = ? AND principal = ?",
                (server, principal),
            )
            return bool(cursor.rowcount)

        return await anyio.to_thread.run_sync(partial(self._transaction, work))

    async def logins(self) -> list[SealedLogin]:
        """See :meth:`sagents.store._protocols.LoginStore.logins`."""

        def work(db: Paced) -> list[SealedLogin]:
            rows = db.execute(
                "SELECT server, principal, sealed, updated FROM upstream_logins "
                "ORDER BY server, principal"
            ).fetchall()
            return [SealedLogin(row[0], row[1], bytes(row[2]), row[3]) for row in rows]

        return await anyio.to_thread.run_sync(partial(self._transaction, work))

    async def reseal(self, reseal: Callable[[bytes], bytes]) -> int:
        """See :meth:`sagents.store._protocols.LoginStore.reseal`."""

        def work(db: Paced) -> int:
            rows: Sequence[tuple[str, str, bytes]] = db.execute(
                "SELECT server, principal, sealed FROM upstream_logins"
            ).fetchall()
            for server, principal, sealed in rows:
                db.execute(
                    "UPDATE upstream_logins SET sealed = ? WHERE server = ? AND principal = ?",
                    (reseal(bytes(sealed)), server, principal),
                )
            return len(rows)

        return await anyio.to_thread.run_sync(partial(self._transaction, work))

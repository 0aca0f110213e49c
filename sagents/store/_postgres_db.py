"""The pool of a PostgreSQL store's replica, with what it knows of the database's health
(docs/scale-out.md, "When the database is down"): every table of the store
(:mod:`sagents.store._postgres`, :mod:`sagents.store._postgres_records`,
:mod:`sagents.store._postgres_state`) reaches the database through :class:`Database`, so that
a driver error is a :class:`~sagents.errors.StoreError` everywhere, and writes its audit rows
with :func:`insert_audit`.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from sagents.audit._store import AuditEntry
from sagents.errors import StoreError, StoreUnavailableError

__all__ = ["PROBE_TIMEOUT_S", "STORE_SECRET", "Database", "insert_audit"]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2  # seconds a check of a store known to be down waits to connect
STORE_SECRET = "request_state_key"
"""The name of the replicas' shared secret in ``sagents_secrets`` (the keys sealing
``requestState`` and binding approvals are derived from it)."""


class Database:
    """The pool of a replica, with what it knows of the database's health.

    Attributes:
        down: Why the database was out of reach at the last try, or None (it answered).
    """

    def __init__(self, pool: AsyncConnectionPool, url: str, shown: str) -> None:
        self.pool = pool
        self.url = url
        self.shown = shown
        self.down: StoreUnavailableError | None = None

    def unavailable(self, reason: str) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"cannot reach the store {self.shown}: {' '.join(reason.split())}",
            hint="check that PostgreSQL runs there and accepts this user and password "
            "(pg_isready; the server's pg_hba.conf), or start without --store",
            details={"store": self.shown},
        )

    @asynccontextmanager
    async def connection(
        self, *, wait_s: float | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[TupleRow]]:
        """A checked connection of the pool; driver errors become :class:`StoreError`.

        Raises:
            StoreUnavailableError: no connection within ``wait_s`` seconds (the pool's timeout
                by default), or the connection broke (the database stopped or restarted).
            StoreError: the database refused the statement.
        """
        try:
            async with self.pool.connection(timeout=wait_s) as db:
                yield db
        except (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError) as error:
            if self.down is None:
                logger.warning("the store %s is out of reach: %s", self.shown, error)
            self.down = self.unavailable(str(error))
            raise self.down from error
        except psycopg.Error as error:
            raise StoreError(
                f"the store {self.shown} refused a statement: {' '.join(str(error).split())}",
                details={"store": self.shown},
            ) from error
        if self.down is not None:
            logger.warning("the store %s answers again", self.shown)
            self.down = None

    async def ensure_reachable(self) -> None:
        """Return at once unless the database was out of reach at the last try; then connect
        to it once, outside the pool (which may be backing off), for at most
        :data:`PROBE_TIMEOUT_S` seconds.

        Raises:
            StoreUnavailableError: it still is.
        """
        if self.down is None:
            return
        try:
            probe = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=PROBE_TIMEOUT_S
            )
            async with probe:
                await probe.execute("SELECT 1")
        except psycopg.Error as error:
            self.down = self.unavailable(str(error))
            raise self.down from error
        logger.warning("the store %s answers again", self.shown)
        self.down = None

    async def secret(self, name: str) -> bytes:
        """The secret ``name`` the replicas share (32 random bytes, made by the first replica
        that needs it, in ``sagents_secrets``).

        Raises:
            StoreError: see :meth:`connection`.
        """
        async with self.connection() as db:
            await db.execute(
                "INSERT INTO sagents_secrets (name, value) VALUES (%s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (name, secrets.token_bytes(32)),
            )
            cursor = await db.execute("SELECT value FROM sagents_secrets WHERE name = %s", (name,))
            row = await cursor.fetchone()
        assert row is not None
        return bytes(row[0])


async def insert_audit(db: psycopg.AsyncConnection[TupleRow], entry: AuditEntry) -> None:
    """Insert one audit entry on ``db``: in the transaction of the change it records, when
    there is one (a memory written with its row, docs/builtin_tools.md)."""
    data = Jsonb(dict(entry.data), dumps=lambda v: json.dumps(v, default=str))
    await db.execute(
        "INSERT INTO sagents_audit (ts, kind, session_id, tool, status, data) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (entry.ts, entry.kind, entry.session_id, entry.tool, entry.status, data),
    )

"""The embedded :class:`~sagents.store._protocols.AgentStore`: one SQLite file in the data
directory (``agents.sqlite3``), shared by the processes of one machine.

Each call opens its own connection in a worker thread (SQLite's file locks make the claim of a
paused run atomic across processes: an ``INSERT`` of the state's id into ``claims`` succeeds
once); failures are :class:`~sagents.errors.StoreError` naming the file.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio

from sagents.audit._store import connect_private, default_data_dir, sqlite_store_error

__all__ = ["AGENTS_FILE", "SqliteAgentStore"]

AGENTS_FILE: Final = "agents.sqlite3"

_T = TypeVar("_T")

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS run_states (state_id TEXT PRIMARY KEY, session_id TEXT NOT "
    "NULL, document TEXT NOT NULL, saved REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS run_claims (state_id TEXT PRIMARY KEY, claimed REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agent_sessions (session_id TEXT PRIMARY KEY, document TEXT "
    "NOT NULL, saved REAL NOT NULL)",
)


@dataclass(frozen=True, kw_only=True)
class SqliteAgentStore:
    """Paused runs and agent sessions in one SQLite file.

    Attributes:
        path: The database file (``<data dir>/agents.sqlite3`` by default; created 0600 with
            its folder on first use).
    """

    path: Path = field(default_factory=lambda: default_data_dir() / AGENTS_FILE)

    def _use(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            connection = connect_private(self.path)
            try:
                connection.isolation_level = None  # autocommit: each statement is atomic
                for statement in _SCHEMA:
                    connection.execute(statement)
                return work(connection)
            finally:
                connection.close()
        except (sqlite3.Error, OSError) as error:
            raise sqlite_store_error(self.path, error) from error

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        return await anyio.to_thread.run_sync(partial(self._use, work))

    async def save_state(self, state_id: str, session_id: str, document: str) -> None:
        """See ``AgentStore.save_state``."""
        await self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO run_states VALUES (?, ?, ?, ?)",
                (state_id, session_id, document, time.time()),
            )
        )

    async def load_state(self, state_id: str) -> str | None:
        """See ``AgentStore.load_state``."""
        return await self._run(
            partial(_one, "SELECT document FROM run_states WHERE state_id = ?", (state_id,))
        )

    async def claim_state(self, state_id: str) -> bool:
        """See ``AgentStore.claim_state``: the row's primary key makes it once."""

        def claim(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "INSERT OR IGNORE INTO run_claims VALUES (?, ?)", (state_id, time.time())
            )
            return cursor.rowcount == 1

        return await self._run(claim)

    async def save_session(self, session_id: str, document: str) -> None:
        """See ``AgentStore.save_session``."""
        await self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO agent_sessions VALUES (?, ?, ?)",
                (session_id, document, time.time()),
            )
        )

    async def load_session(self, session_id: str) -> str | None:
        """See ``AgentStore.load_session``."""
        return await self._run(
            partial(_one, "SELECT document FROM agent_sessions WHERE session_id = ?", (session_id,))
        )

    async def last_session(self, prefix: str = "") -> str | None:
        """See ``AgentStore.last_session``."""
        return await self._run(
            partial(
                _one,
                "SELECT session_id FROM agent_sessions WHERE substr(session_id, 1, length(?)) = ? "
                "ORDER BY saved DESC LIMIT 1",
                (prefix, prefix),
            )
        )

    async def pending_state(self, session_id: str) -> str | None:
        """See ``AgentStore.pending_state``."""
        return await self._run(
            partial(
                _one,
                "SELECT state_id FROM run_states WHERE session_id = ? AND state_id NOT IN "
                "(SELECT state_id FROM run_claims) ORDER BY saved DESC LIMIT 1",
                (session_id,),
            )
        )


def _one(query: str, params: tuple[Any, ...], db: sqlite3.Connection) -> str | None:
    row = db.execute(query, params).fetchone()
    return None if row is None else str(row[0])

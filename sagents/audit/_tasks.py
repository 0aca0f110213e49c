"""The background-task store: handed-off calls outlive the process that ran them.

The gateway records each call it hands off to the background (a row per task: its owner, tool,
status and, once finished, its result text), so that after a restart ``script_status`` still
answers for it. Calls are never resumed: at start-up, rows a previous process left ``running``
are marked ``failed`` with the reason (:meth:`SqliteTaskStore.mark_interrupted`), and the
owner, when it can be identified, is told once when it reconnects
(:meth:`SqliteTaskStore.take_unannounced`).

One SQLite file (the standard library's ``sqlite3``), beside the audit store.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sagents.audit._store import BUSY_TIMEOUT_S, Paced, connect_private, sqlite_store_error

__all__ = ["SqliteTaskStore", "StoredTask"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    result TEXT,
    is_error INTEGER,
    reason TEXT,
    announced INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, started_at);
"""
_COLUMNS = "task_id, owner, tool, status, started_at, finished_at, result, is_error, reason"
RESULT_CHARS = 20_000
"""Characters of a task's result text kept in the store (the full output stays in the run's
records)."""


@dataclass(frozen=True, kw_only=True)
class StoredTask:
    """One stored background task.

    Attributes:
        task_id: The handle its starter received.
        owner: Who may see it without the handle (an opaque key; "" for nobody).
        tool: The tool's name.
        status: ``running``, ``ok``, ``error``, ``cancelled`` or ``failed`` (ended by a restart).
        started_at: Unix time, seconds.
        finished_at: Unix time, seconds, or None.
        result: The result's text (at most :data:`RESULT_CHARS` characters), or None.
        is_error: Whether the result is an error, or None while running.
        reason: Why it failed without a result (``gateway restarted``), or None.
    """

    task_id: str
    owner: str
    tool: str
    status: str
    started_at: float
    finished_at: float | None = None
    result: str | None = None
    is_error: bool | None = None
    reason: str | None = None


class SqliteTaskStore:
    """Background tasks in one SQLite file (created with its folder on first use).

    Args:
        path: The database file.
        busy_timeout_s: Seconds one call waits, in all, for a lock another process holds
            (then it fails with ``StoreUnavailableError``).
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s

    @contextmanager
    def _db(self) -> Iterator[Paced]:
        """A connection in one transaction (committed when the block ends, then closed), all
        its statements within one busy timeout.

        Raises:
            StoreError: see :func:`~sagents.audit._store.sqlite_store_error`.
        """
        try:
            connection = connect_private(self.path)
            try:
                db = Paced(connection, self.busy_timeout_s)
                db.script(_SCHEMA)
                with connection:
                    yield db
            finally:
                connection.close()
        except (sqlite3.Error, OSError) as error:
            raise sqlite_store_error(self.path, error) from error

    def check(self) -> None:
        """Open the database (created if missing) and check that it is one.

        Raises:
            StoreError: see :func:`~sagents.audit._store.sqlite_store_error`.
        """
        with self._db() as db:
            db.execute("SELECT count(*) FROM tasks LIMIT 1")

    def started(self, task_id: str, *, owner: str, tool: str, started_at: float) -> None:
        """Record a task handed off to the background."""
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO tasks (task_id, owner, tool, status, started_at) "
                "VALUES (?, ?, ?, 'running', ?)",
                (task_id, owner, tool, started_at),
            )

    def finished(
        self, task_id: str, *, status: str, result: str, is_error: bool, reason: str | None = None
    ) -> bool:
        """Record how a task ended (its result text, cut to :data:`RESULT_CHARS`; ``reason``
        when the gateway, not a client, ended it: ``gateway stopped``).

        Returns:
            Whether it was written: a terminal status is written once, so a task already
            ended (``failed`` by a restart's sweep) keeps its status.
        """
        with self._db() as db:
            cursor = db.execute(
                "UPDATE tasks SET status = ?, finished_at = ?, result = ?, is_error = ?, "
                "reason = ?, announced = 1 WHERE task_id = ? AND status = 'running'",
                (status, time.time(), result[:RESULT_CHARS], int(is_error), reason, task_id),
            )
            return cursor.rowcount == 1

    def mark_interrupted(self, reason: str) -> list[StoredTask]:
        """Mark every ``running`` task ``failed`` with ``reason``; returns them, as marked."""
        now = time.time()
        with self._db() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM tasks WHERE status = 'running'").fetchall()
            db.execute(
                "UPDATE tasks SET status = 'failed', finished_at = ?, reason = ?, is_error = 1 "
                "WHERE status = 'running'",
                (now, reason),
            )
        return [
            StoredTask(**{**_task(row).__dict__, "status": "failed", "reason": reason})
            for row in rows
        ]

    def get(self, task_id: str) -> StoredTask | None:
        """One task, or None."""
        with self._db() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        return _task(row) if row is not None else None

    def owned(self, owner: str) -> list[StoredTask]:
        """The tasks of ``owner``, oldest first (none for the empty owner)."""
        if not owner:
            return []
        with self._db() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE owner = ? ORDER BY started_at", (owner,)
            ).fetchall()
        return [_task(row) for row in rows]

    def take_unannounced(self, owner: str) -> list[StoredTask]:
        """The owner's tasks ended by a restart that it was not told of yet (then told)."""
        if not owner:
            return []
        with self._db() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE owner = ? AND status = 'failed' "
                "AND announced = 0 ORDER BY started_at",
                (owner,),
            ).fetchall()
            db.execute(
                "UPDATE tasks SET announced = 1 WHERE owner = ? AND status = 'failed'", (owner,)
            )
        return [_task(row) for row in rows]


def _task(row: tuple[object, ...]) -> StoredTask:
    task_id, owner, tool, status, started, finished, result, is_error, reason = row
    return StoredTask(
        task_id=str(task_id),
        owner=str(owner),
        tool=str(tool),
        status=str(status),
        started_at=float(str(started)),
        finished_at=float(str(finished)) if finished is not None else None,
        result=str(result) if result is not None else None,
        is_error=bool(is_error) if is_error is not None else None,
        reason=str(reason) if reason is not None else None,
    )

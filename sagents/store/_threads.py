"""Conversations kept server-side by thread id (the AG-UI route's ``threadId``, docs/chat.md).

One SQLite file in the data directory (``threads.sqlite3``): each thread's owner (the identity
of the credential that opened it), its history (Chat Completions messages, as the agent loop
keeps them) and the id each message has on the AG-UI wire. A page reloaded, or opened in a
second tab, gets the conversation from here; the client's own copy is never trusted.

Reads and writes run in worker threads; a failure (a full disk, a lock held elsewhere, a file
that is not a database) is a :class:`~sagents.errors.StoreUnavailableError` naming the file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from sagents.errors import StoreUnavailableError

__all__ = ["THREADS_FILE", "SqliteThreads", "StoredThread"]

THREADS_FILE = "threads.sqlite3"
"""The file's name in the data directory."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    thread_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    messages TEXT NOT NULL,
    ids TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS thread_waiting (
    thread_id TEXT PRIMARY KEY,
    document TEXT NOT NULL
);
"""
_BUSY_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class StoredThread:
    """One thread's conversation.

    Attributes:
        thread_id: The thread. owner: Who opened it ("" for nobody in particular).
        messages: The history, Chat Completions messages.
        ids: The AG-UI message id of each message (same length as ``messages``).
        waiting: What the thread's paused run waits for, and why earlier items ended (the
            route's JSON document), or None.
    """

    thread_id: str
    owner: str
    messages: tuple[dict[str, Any], ...] = ()
    ids: tuple[str, ...] = field(default=())
    waiting: dict[str, Any] | None = None


@dataclass(kw_only=True)
class SqliteThreads:
    """Threads in one SQLite file.

    Args:
        path: The database file (made, with its directory, on first use).
    """

    path: Path

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S)
        connection.executescript(_SCHEMA)
        return connection

    def _failed(self, error: Exception) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"the conversation store {str(self.path)!r} cannot be used: {error}",
            hint="check the disk and the file; move a broken file aside to start empty",
        )

    def _load(self, thread_id: str) -> StoredThread | None:
        connection = self._connect()
        try:
            row = connection.execute(
                "SELECT owner, messages, ids FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            waiting = connection.execute(
                "SELECT document FROM thread_waiting WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        finally:
            connection.close()
        if row is None:
            return None
        owner, messages, ids = row
        return StoredThread(
            thread_id=thread_id,
            owner=owner,
            messages=tuple(json.loads(messages)),
            ids=tuple(json.loads(ids)),
            waiting=None if waiting is None else json.loads(waiting[0]),
        )

    def _save(self, thread: StoredThread) -> None:
        connection = self._connect()
        try:
            with connection:
                connection.execute(
                    "INSERT INTO threads (thread_id, owner, messages, ids, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(thread_id) DO UPDATE SET "
                    "messages = excluded.messages, ids = excluded.ids, "
                    "updated_at = excluded.updated_at",
                    (
                        thread.thread_id,
                        thread.owner,
                        json.dumps(list(thread.messages), ensure_ascii=False),
                        json.dumps(list(thread.ids)),
                        time.time(),
                    ),
                )
                if thread.waiting is None:
                    connection.execute(
                        "DELETE FROM thread_waiting WHERE thread_id = ?", (thread.thread_id,)
                    )
                else:
                    connection.execute(
                        "INSERT INTO thread_waiting (thread_id, document) VALUES (?, ?) "
                        "ON CONFLICT(thread_id) DO UPDATE SET document = excluded.document",
                        (thread.thread_id, json.dumps(thread.waiting, ensure_ascii=False)),
                    )
        finally:
            connection.close()

    def _change_waiting(
        self,
        thread_id: str,
        change: Callable[[dict[str, Any] | None], tuple[bool, dict[str, Any] | None]],
    ) -> bool:
        """In one transaction: ``change`` sees the stored document (None: no row) and says
        whether to write, and what (None: delete the row). Whether it wrote."""
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                row = connection.execute(
                    "SELECT document FROM thread_waiting WHERE thread_id = ?", (thread_id,)
                ).fetchone()
                write, document = change(None if row is None else json.loads(row[0]))
                if not write:
                    connection.execute("ROLLBACK")
                    return False
                if document is None:
                    connection.execute(
                        "DELETE FROM thread_waiting WHERE thread_id = ?", (thread_id,)
                    )
                else:
                    connection.execute(
                        "INSERT INTO thread_waiting (thread_id, document) VALUES (?, ?) "
                        "ON CONFLICT(thread_id) DO UPDATE SET document = excluded.document",
                        (thread_id, json.dumps(document, ensure_ascii=False)),
                    )
                connection.execute("COMMIT")
                return True
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        finally:
            connection.close()

    def _clear_waiting(self, thread_id: str, state_id: str) -> bool:
        def clear(document: dict[str, Any] | None) -> tuple[bool, dict[str, Any] | None]:
            document = dict(document or {})
            if (document.get("waiting") or {}).get("state_id") != state_id:
                return False, None
            document["waiting"] = None
            return True, document

        return self._change_waiting(thread_id, clear)

    def _replace_waiting(
        self, thread_id: str, expected: dict[str, Any] | None, document: dict[str, Any] | None
    ) -> bool:
        return self._change_waiting(thread_id, lambda stored: (stored == expected, document))

    async def replace_waiting(
        self, thread_id: str, expected: dict[str, Any] | None, document: dict[str, Any] | None
    ) -> bool:
        """Write what the thread's paused run waits for as ``document`` (None: nothing), in
        one transaction, only if the stored one is still ``expected`` (what the caller read):
        a decision given through another process is never overwritten. Whether it was written.

        Raises:
            StoreUnavailableError: the file cannot be used.
        """
        try:
            return await anyio.to_thread.run_sync(
                self._replace_waiting, thread_id, expected, document
            )
        except (sqlite3.Error, OSError, ValueError) as error:
            raise self._failed(error) from error

    async def clear_waiting(self, thread_id: str, state_id: str) -> bool:
        """Forget what the thread's paused run ``state_id`` waits for (it was resumed
        elsewhere), in one transaction: never a newer paused run's. Whether it was kept.

        Raises:
            StoreUnavailableError: the file cannot be used.
        """
        try:
            return await anyio.to_thread.run_sync(self._clear_waiting, thread_id, state_id)
        except (sqlite3.Error, OSError, ValueError) as error:
            raise self._failed(error) from error

    async def load(self, thread_id: str) -> StoredThread | None:
        """The thread, or None when it was never saved.

        Raises:
            StoreUnavailableError: the file cannot be read.
        """
        try:
            return await anyio.to_thread.run_sync(self._load, thread_id)
        except (sqlite3.Error, OSError, ValueError) as error:
            raise self._failed(error) from error

    async def save(self, thread: StoredThread) -> None:
        """Write the thread (its owner is kept from the first save).

        Raises:
            StoreUnavailableError: the file cannot be written.
        """
        try:
            await anyio.to_thread.run_sync(self._save, thread)
        except (sqlite3.Error, OSError) as error:
            raise self._failed(error) from error

r"""The audit store: one row per audited event, in SQLite (docs/run_script.md, "Records and audit").

run_script writes one ``gateway_call`` entry per script (never one per inner call). The default
store is an embedded SQLite file, ``<data dir>/audit.sqlite3``; the data directory is
``$SAGENTS_DATA_DIR``, else ``$XDG_DATA_HOME/sagents``, else ``~/.local/share/sagents``.
SQLite calls run in worker threads (``anyio.to_thread``), one at a time on a connection that the
store opens on first use and keeps until :meth:`SqliteAuditStore.close`.

Failures are :class:`~sagents.errors.StoreError`\s (:func:`sqlite_store_error`): a full disk or a
lock another process holds past the busy timeout is a
:class:`~sagents.errors.StoreUnavailableError`; a file that is not a database is a plain
``StoreError`` that says how to move it aside.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import anyio

from sagents.errors import StoreError, StoreUnavailableError

__all__ = [
    "AUDIT_FILE",
    "BUSY_TIMEOUT_S",
    "AuditEntry",
    "AuditKind",
    "AuditStore",
    "Paced",
    "ReachableStore",
    "SqliteAuditStore",
    "connect_private",
    "default_audit_path",
    "default_data_dir",
    "sqlite_store_error",
]

BUSY_TIMEOUT_S = 10.0
"""Seconds one store call waits, in all, for a lock another connection or process holds."""
_BROKEN = (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT)  # the file itself is bad

_T = TypeVar("_T")

AuditKind = Literal["gateway_call", "memory_write", "memory_delete"]
"""``gateway_call``: one call that the gateway ran on the model's behalf (a whole run_script);
``memory_write`` / ``memory_delete``: a long-term memory stored or removed
(docs/builtin_tools.md)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    session_id TEXT,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_kind_ts ON audit (kind, ts);
"""


def default_data_dir() -> Path:
    """``$SAGENTS_DATA_DIR``, else ``$XDG_DATA_HOME/sagents``, else ``~/.local/share/sagents``;
    always absolute (a relative one against the current directory: the command line fixes it
    once at start, :func:`resolve_data_dir`)."""
    explicit = os.environ.get("SAGENTS_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return (base / "sagents").absolute()


def resolve_data_dir() -> None:
    """Make a relative ``$SAGENTS_DATA_DIR`` (``data``) absolute, against the current
    directory, for the rest of the process and its children: every later reader (the sandbox's
    binds, the stores, a server's home) then names the same directory, whatever directory it
    works in. The command line calls it once, at start."""
    explicit = os.environ.get("SAGENTS_DATA_DIR")
    if explicit:
        os.environ["SAGENTS_DATA_DIR"] = str(Path(explicit).expanduser().absolute())


AUDIT_FILE = "audit.sqlite3"
"""The audit store's file name in a data directory (the one place it is spelled)."""


def default_audit_path() -> Path:
    """``<data dir>/audit.sqlite3`` (see :func:`default_data_dir`)."""
    return default_data_dir() / AUDIT_FILE


def sqlite_store_error(path: Path, error: sqlite3.Error | OSError) -> StoreError:
    """The :class:`~sagents.errors.StoreError` for a failure of the SQLite file ``path``.

    A file that is not a database (or is corrupt) is a ``StoreError`` naming the file and how
    to move it aside; anything else (a full disk, a lock held past the busy timeout, a
    folder that cannot be written) is a ``StoreUnavailableError``. One line each.
    """
    reason = " ".join(str(error).split()) or type(error).__name__
    details = {"store": str(path)}
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _BROKEN:
        aside = path.with_name(path.name + ".broken")
        return StoreError(
            f"{path} is not a SQLite database ({reason})",
            hint=f"move it aside with 'mv {path} {aside}' and start again: a new one is "
            "created; keep the old file for inspection",
            details=details,
        )
    return StoreUnavailableError(f"cannot use the store {path}: {reason}", details=details)


def connect_private(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """Open the SQLite file ``path`` readable by this user only, whatever the umask.

    ``check_same_thread`` is :func:`sqlite3.connect`'s: False for a connection that several
    threads use in turn, under a lock of the caller's.

    The gateway's stores hold every call's arguments and background results: a missing folder
    is created 0700, the file is created 0600 (SQLite gives new journal files the database
    file's mode) and an existing file of ours with group or other bits is narrowed to 0600, and
    so are its existing journal files (``-journal``, ``-wal``, ``-shm``: they hold its pages).

    Raises:
        OSError: the folder or file cannot be created or opened (a symlink is not followed).
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _narrow(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    for suffix in _JOURNALS:
        try:
            fd = os.open(
                path.with_name(path.name + suffix), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except FileNotFoundError:
            continue
        _narrow(fd)
    return sqlite3.connect(path, timeout=10.0, check_same_thread=check_same_thread)


_JOURNALS = ("-journal", "-wal", "-shm")


def _narrow(fd: int) -> None:
    """Narrow the open file ``fd`` to 0600 if it is ours and has group or other bits; close it."""
    try:
        info = os.fstat(fd)
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """One audited event.

    Attributes:
        kind: What happened (``gateway_call``).
        ts: When it ended, seconds since the Unix epoch.
        tool: The tool called (``run_script``).
        status: How it ended (``ok``, ``error``, ``timeout``, ...).
        session_id: The calling session, if known.
        data: JSON-serialisable details (for run_script: description, calls, failed,
            calls_per_tool, duration_s, exit_code, records_dir, script).
    """

    kind: AuditKind
    ts: float
    tool: str
    status: str
    session_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


class AuditStore(Protocol):
    """Where audit entries go."""

    async def record(self, entry: AuditEntry) -> None:
        """Store one entry.

        Raises:
            StoreError: the store cannot be written (``StoreUnavailableError``: not now).
        """
        ...


@runtime_checkable
class ReachableStore(Protocol):
    """A store that knows when it is down (a database out of reach): a run that needs it is
    refused before it starts rather than run without its audit row."""

    async def ensure_reachable(self) -> None:
        """Return at once unless the store was down at the last try; then try it again.

        Raises:
            StoreUnavailableError: it is still down.
        """
        ...


def _identity(path: Path) -> tuple[int, int] | None:
    """The file at ``path`` as (device, inode); None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class Paced:
    """A connection whose every statement waits for locks only until one deadline (SQLite's
    busy timeout is per statement: a call of several would wait that long for each).

    Args:
        connection: The SQLite connection.
        busy_timeout_s: Seconds, from now, that all its statements may wait in all.
    """

    def __init__(self, connection: sqlite3.Connection, busy_timeout_s: float) -> None:
        self.connection = connection
        self._deadline = time.monotonic() + busy_timeout_s

    def script(self, schema: str) -> None:
        """Run each statement of ``schema`` (``;``-separated, no ``;`` inside one)."""
        for statement in schema.split(";"):
            if statement.strip():
                self.execute(statement)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        left_ms = max(0, int((self._deadline - time.monotonic()) * 1000))
        self.connection.execute(f"PRAGMA busy_timeout = {left_ms}")
        return self.connection.execute(sql, params)


class _Link:
    """The store's one connection, opened on first use, used by one thread at a time, and the
    file it was opened on (device, inode)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connection: sqlite3.Connection | None = None
        self.file: tuple[int, int] | None = None


@dataclass(frozen=True, kw_only=True)
class SqliteAuditStore:
    """An audit store in one SQLite file (created with its folder on first use).

    The store keeps one connection, opened on first use (opening one, and checking the schema,
    for every entry cost more than the entry); :meth:`close` closes it, and a later call opens
    a new one. A connection that failed is dropped, so the next call starts afresh. Each entry
    is committed before :meth:`record` returns, so other connections (the console, another
    process) see it at once.

    Attributes:
        path: The database file; :func:`default_audit_path` by default.
        busy_timeout_s: Seconds one call waits, in all, for a lock another process holds
            (then it fails with ``StoreUnavailableError``).
    """

    path: Path = field(default_factory=default_audit_path)
    busy_timeout_s: float = BUSY_TIMEOUT_S
    _link: _Link = field(default_factory=_Link, init=False, repr=False, compare=False)

    def _use(self, work: Callable[[Paced], _T]) -> _T:
        """Run ``work`` on the connection (opened if needed), one thread at a time, every
        statement within one :attr:`busy_timeout_s` in all.

        Raises:
            StoreError: see :func:`sqlite_store_error`.
        """
        link = self._link
        with link.lock:
            try:
                if link.connection is not None and _identity(self.path) != link.file:
                    # removed or replaced (cleared, rotated): the kept connection would write
                    # to the old file, or fail; the entry goes to the file now at the path
                    link.connection.close()
                    link.connection = None
                paced = None
                if link.connection is None:
                    connection = connect_private(self.path, check_same_thread=False)
                    connection.isolation_level = None  # transactions are explicit
                    paced = Paced(connection, self.busy_timeout_s)
                    try:
                        paced.script(_SCHEMA)
                    except BaseException:
                        connection.close()
                        raise
                    link.connection = connection
                    link.file = _identity(self.path)
                try:
                    return work(paced or Paced(link.connection, self.busy_timeout_s))
                except sqlite3.Error:
                    link.connection.close()
                    link.connection = None
                    raise
            except (sqlite3.Error, OSError) as error:
                raise sqlite_store_error(self.path, error) from error

    def check(self) -> None:
        """Open the database (created if missing) and check that it is one.

        Raises:
            StoreError: see :func:`sqlite_store_error`.
        """
        self._use(lambda db: db.execute("SELECT count(*) FROM audit LIMIT 1"))

    def _insert(self, entry: AuditEntry) -> None:
        self.record_with(lambda: None, lambda _: entry)

    def record_with(
        self, write: Callable[[], _T], entry_of: Callable[[_T], AuditEntry | None]
    ) -> _T:
        """Run ``write`` (a change kept elsewhere: a memory stored) while this store holds its
        write lock, then record ``entry_of(its result)`` (None: nothing to record) in that same
        audit transaction, so that a change is kept only with its row. Blocking: call it from
        a worker thread.

        When the audit cannot be written now (another process holds its lock past
        :attr:`busy_timeout_s`, a full disk), ``write`` does not run. When ``write`` raises,
        nothing is recorded. The one window left is the audit's own commit failing after
        ``write`` kept its change (the disk filling at that instant); the error is raised then
        too, so the change is never answered ok.

        Returns:
            What ``write`` returned.

        Raises:
            StoreError: the audit (see :func:`sqlite_store_error`); and whatever ``write``
                raises.
        """

        def locked(db: Paced) -> _T:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = write()
                entry = entry_of(result)
                if entry is not None:
                    data = json.dumps(dict(entry.data), ensure_ascii=False, default=str)
                    db.execute(
                        "INSERT INTO audit (ts, kind, session_id, tool, status, data) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (entry.ts, entry.kind, entry.session_id, entry.tool, entry.status, data),
                    )
                db.execute("COMMIT")
            except BaseException:
                if db.connection.in_transaction:
                    db.connection.rollback()
                raise
            return result

        return self._use(locked)

    def _select(self, kind: str | None, limit: int) -> list[AuditEntry]:
        query = "SELECT ts, kind, session_id, tool, status, data FROM audit"
        params: tuple[Any, ...] = ()
        if kind is not None:
            query += " WHERE kind = ?"
            params = (kind,)

        def select(db: Paced) -> list[tuple[Any, ...]]:
            return db.execute(query + " ORDER BY id DESC LIMIT ?", (*params, limit)).fetchall()

        return [
            AuditEntry(
                ts=ts, kind=k, session_id=sid, tool=tool, status=status, data=json.loads(data)
            )
            for ts, k, sid, tool, status, data in self._use(select)
        ]

    def close(self) -> None:
        """Close the store's connection, if open (idempotent; blocking: it waits for a call in
        a worker thread to finish)."""
        link = self._link
        with link.lock:
            connection, link.connection = link.connection, None
        if connection is not None:
            connection.close()

    async def record(self, entry: AuditEntry) -> None:
        """Insert one entry (in a worker thread)."""
        await anyio.to_thread.run_sync(self._insert, entry)

    async def entries(self, *, kind: AuditKind | None = None, limit: int = 100) -> list[AuditEntry]:
        """The latest entries first, optionally of one kind.

        Args:
            kind: Only entries of this kind.
            limit: At most this many.
        """
        return await anyio.to_thread.run_sync(self._select, kind, limit)

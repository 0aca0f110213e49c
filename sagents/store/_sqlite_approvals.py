"""The embedded store's pending approvals, kept in ``<data dir>/approvals.sqlite3`` so that a
2026-07-28 client's approval survives a restart of ``sagents serve`` (docs/gateway.md,
"Modes and approvals"), and the key that seals their ``requestState`` (``<data dir>/gateway.key``).

It also holds the approvals that wait for the web console (``held_approvals``,
:mod:`sagents.store._held`), so that their cards are shown again after a restart.

A nonce is minted for one session and one call and redeemed once, before it expires (wall
clock: the expiry outlives the process); the row binds it to the call with a digest keyed with
the approval key (from ``gateway.key``), never a bare hash of the arguments; each session
keeps at most :data:`~sagents.store._embedded.MAX_PENDING_APPROVALS_PER_SESSION` and all
sessions together :data:`~sagents.store._embedded.MAX_PENDING_APPROVALS` (past either, the
oldest of that session, or of the session that holds the most, is dropped: it is asked again).
Session grants stay in memory, as before: "allow for this session" lasts as long as the
process.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import stat
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio

from sagents.audit._store import connect_private, sqlite_store_error
from sagents.errors import StoreError
from sagents.store._held import HeldApproval
from sagents.store._protocols import SettledHandler

__all__ = ["APPROVALS_FILE", "GATEWAY_KEY_FILE", "SqliteApprovals", "gateway_key"]

APPROVALS_FILE: Final = "approvals.sqlite3"
GATEWAY_KEY_FILE: Final = "gateway.key"
_KEY_BYTES: Final = 32

_T = TypeVar("_T")

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS pending_approvals (nonce TEXT PRIMARY KEY, session_id TEXT NOT "
    "NULL, call TEXT NOT NULL, issued REAL NOT NULL, expires_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS pending_approvals_session ON pending_approvals (session_id)",
    "CREATE TABLE IF NOT EXISTS held_approvals (approval_id TEXT PRIMARY KEY, binding TEXT NOT "
    "NULL, call TEXT NOT NULL, card TEXT NOT NULL, asker TEXT NOT NULL, asked_at REAL NOT NULL, "
    "expires_at REAL NOT NULL, answer TEXT)",
)
_HELD_COLUMNS: Final = "approval_id, binding, call, card, asker, asked_at, expires_at, answer"
# The file's version (``PRAGMA user_version``): 1 since the pending approvals' digests are keyed;
# a file at 0 may hold the bare digests an older release wrote, removed when it is first used.
_VERSION: Final = 1


def gateway_key(directory: Path) -> bytes:
    """The embedded gateway's secret: ``<directory>/gateway.key`` (32 random bytes, hex, made
    with mode 0600 when missing). It seals ``requestState`` and binds a pending approval to its
    client's token and profile, so that both outlive a restart.

    Raises:
        StoreError: the file is readable by others, malformed, or cannot be read or created.
    """
    path = directory / GATEWAY_KEY_FILE
    details = {"store": str(path)}
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(secrets.token_hex(_KEY_BYTES))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="ascii") as file:
            mode = os.fstat(file.fileno()).st_mode
            text = file.read().strip()
    except OSError as error:
        message = f"cannot read or create the key {path}: {error}"
        raise StoreError(message, details=details) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise StoreError(
            f"the key {path} is readable by other users (mode {mode & 0o777:o})",
            hint=f"chmod 600 {path}",
            details=details,
        )
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != _KEY_BYTES:
        raise StoreError(
            f"the key {path} is not {_KEY_BYTES} bytes of hex",
            hint="remove it: a new one is made (approvals asked before are then asked again)",
            details=details,
        )
    return key


class SqliteApprovals:
    """The :class:`~sagents.store._protocols.ApprovalStore` of the embedded store.

    Args:
        path: The database file (created 0600 on first use).
        ttl_s: Seconds a nonce stays redeemable (``approvals.timeoutSec``).
        clock: Seconds since the epoch (tests pass their own).
    """

    def __init__(self, path: Path, *, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.ttl_s = ttl_s
        self._clock = clock
        self._grants: dict[str, set[str]] = {}
        self._key: bytes | None = None

    def _call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """The pending approval's digest of the call, keyed (runs in a worker thread).

        Raises:
            StoreError: the key cannot be read or made (:func:`gateway_key`).
        """
        from sagents.store._embedded import approval_key, keyed_call_digest

        if self._key is None:
            self._key = approval_key(gateway_key(self.path.parent))
        return keyed_call_digest(self._key, tool, arguments)

    def _use(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            db = connect_private(self.path)
            try:
                db.isolation_level = None  # explicit transactions below
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute("BEGIN IMMEDIATE")
                try:
                    (version,) = db.execute("PRAGMA user_version").fetchone()
                    if version < _VERSION:  # bare digests of an older release: asked again
                        db.execute("DELETE FROM pending_approvals")
                        db.execute(f"PRAGMA user_version = {_VERSION}")
                    result = work(db)
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                return result
            finally:
                db.close()
        except (sqlite3.Error, OSError) as error:
            raise sqlite_store_error(self.path, error) from error

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        return await anyio.to_thread.run_sync(partial(self._use, work))

    async def issue(self, session_id: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """See ``ApprovalStore.issue``."""
        from sagents.store._embedded import (
            MAX_PENDING_APPROVALS,
            MAX_PENDING_APPROVALS_PER_SESSION,
        )

        nonce = secrets.token_urlsafe(18)
        now = self._clock()

        def issue(db: sqlite3.Connection) -> None:
            call = self._call(tool, arguments)
            db.execute("DELETE FROM pending_approvals WHERE expires_at <= ?", (now,))
            db.execute(
                "DELETE FROM pending_approvals WHERE nonce IN (SELECT nonce FROM "
                "pending_approvals WHERE session_id = ? ORDER BY issued DESC LIMIT -1 OFFSET ?)",
                (session_id, MAX_PENDING_APPROVALS_PER_SESSION - 1),
            )
            (count,) = db.execute("SELECT count(*) FROM pending_approvals").fetchone()
            while count >= MAX_PENDING_APPROVALS:  # the oldest of the session holding the most
                db.execute(
                    "DELETE FROM pending_approvals WHERE nonce = (SELECT nonce FROM "
                    "pending_approvals WHERE session_id = (SELECT session_id FROM "
                    "pending_approvals GROUP BY session_id ORDER BY count(*) DESC LIMIT 1) "
                    "ORDER BY issued LIMIT 1)"
                )
                count -= 1
            db.execute(
                "INSERT INTO pending_approvals VALUES (?, ?, ?, ?, ?)",
                (nonce, session_id, call, now, now + self.ttl_s),
            )

        await self._run(issue)
        return json.dumps({"nonce": nonce})

    async def redeem(
        self, state: str | None, session_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> bool:
        """See ``ApprovalStore.redeem``: spent once, by whichever process redeems it first."""
        from sagents.store._embedded import nonce_of

        nonce = nonce_of(state)
        if nonce is None:
            return False
        now = self._clock()

        def redeem(db: sqlite3.Connection) -> bool:
            digest = self._call(tool, arguments)
            cursor = db.execute(
                "DELETE FROM pending_approvals WHERE nonce = ? AND session_id = ? AND call = ? "
                "AND expires_at > ?",
                (nonce, session_id, digest, now),
            )
            return cursor.rowcount == 1

        return await self._run(redeem)

    async def grant(self, session_id: str, tool: str) -> None:
        """Remember the grant in memory."""
        self._grants.setdefault(session_id, set()).add(tool)

    async def granted(self, session_id: str) -> frozenset[str]:
        """The session's grants."""
        return frozenset(self._grants.get(session_id, ()))

    async def hold(self, held: HeldApproval) -> None:
        """See ``ApprovalStore.hold``."""
        now = self._clock()

        def hold(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM held_approvals WHERE expires_at <= ?", (now,))
            db.execute(
                f"INSERT OR IGNORE INTO held_approvals ({_HELD_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    held.approval_id, held.binding, held.call, held.card, held.asker,
                    held.asked_at, held.expires_at, held.answer,
                ),
            )  # fmt: skip

        await self._run(hold)

    async def release(self, approval_id: str) -> None:
        """See ``ApprovalStore.release``."""
        await self._run(
            lambda db: db.execute(
                "DELETE FROM held_approvals WHERE approval_id = ?", (approval_id,)
            ).close()
        )

    async def held(self) -> list[HeldApproval]:
        """See ``ApprovalStore.held``."""
        now = self._clock()

        def held(db: sqlite3.Connection) -> list[HeldApproval]:
            db.execute("DELETE FROM held_approvals WHERE expires_at <= ?", (now,))
            rows = db.execute(
                f"SELECT {_HELD_COLUMNS} FROM held_approvals ORDER BY asked_at"
            ).fetchall()
            return [_held(row) for row in rows]

        return await self._run(held)

    async def settle(self, approval_id: str, answer: str) -> bool:
        """See ``ApprovalStore.settle``: recorded once, by whichever process answers first."""
        now = self._clock()

        def settle(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE held_approvals SET answer = ?, expires_at = ? WHERE approval_id = ? "
                "AND answer IS NULL AND expires_at > ?",
                (answer, now + self.ttl_s, approval_id, now),
            )
            return cursor.rowcount == 1

        return await self._run(settle)

    async def take(self, binding: str, call: str) -> str | None:
        """See ``ApprovalStore.take``: spent once, by whichever process takes it first."""
        if not binding:
            return None
        now = self._clock()

        def take(db: sqlite3.Connection) -> str | None:
            row = db.execute(
                "SELECT approval_id, answer FROM held_approvals WHERE binding = ? AND call = ? "
                "AND answer IS NOT NULL AND expires_at > ? ORDER BY asked_at LIMIT 1",
                (binding, call, now),
            ).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM held_approvals WHERE approval_id = ?", (row[0],))
            return str(row[1])

        return await self._run(take)

    def on_settled(self, handler: SettledHandler | None) -> None:
        """Nothing to hear: the embedded store serves one gateway process, which hears its
        own answers directly."""


def _held(row: tuple[Any, ...]) -> HeldApproval:
    approval_id, binding, call, card, asker, asked_at, expires_at, answer = row
    return HeldApproval(
        approval_id=approval_id, binding=binding, call=call, card=card, asker=asker,
        asked_at=float(asked_at), expires_at=float(expires_at), answer=answer,
    )  # fmt: skip

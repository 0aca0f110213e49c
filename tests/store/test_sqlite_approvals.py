"""The embedded store's pending approvals (``approvals.sqlite3``) and its key (``gateway.key``):
what lets a 2026-07-28 approval outlive a restart of the gateway."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from sagents.errors import StoreError
from sagents.store._embedded import (
    MAX_PENDING_APPROVALS_PER_SESSION,
    EmbeddedStore,
    call_digest,
)
from sagents.store._sqlite_approvals import (
    APPROVALS_FILE,
    GATEWAY_KEY_FILE,
    SqliteApprovals,
    gateway_key,
)

pytestmark = pytest.mark.anyio


async def test_a_pending_approval_is_bound_spent_once_and_outlives_the_object(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    path = tmp_path / APPROVALS_FILE
    first = SqliteApprovals(path, ttl_s=10, clock=lambda: now[0])
    state = await first.issue("s1", "t", {"a": 1})
    other = await first.issue("s1", "t", {"a": 1})
    again = SqliteApprovals(path, ttl_s=10, clock=lambda: now[0])  # another process, later
    assert not await again.redeem(state, "s2", "t", {"a": 1})  # another session
    assert not await again.redeem(state, "s1", "t", {"a": 2})  # another call
    assert not await again.redeem('{"nonce": 5}', "s1", "t", {"a": 1})
    assert not await again.redeem("not json", "s1", "t", {"a": 1})
    assert await again.redeem(state, "s1", "t", {"a": 1})
    assert not await again.redeem(state, "s1", "t", {"a": 1})  # spent
    now[0] += 10
    assert not await again.redeem(other, "s1", "t", {"a": 1})  # expired
    assert path.stat().st_mode & 0o077 == 0


async def test_one_session_flooding_approvals_never_evicts_another_sessions_pending_one(
    tmp_path: Path,
) -> None:
    approvals = SqliteApprovals(tmp_path / APPROVALS_FILE, ttl_s=60)
    theirs = await approvals.issue("victim", "t", {})
    mine = [await approvals.issue("flood", "t", {"n": n}) for n in range(70)]
    assert await approvals.redeem(theirs, "victim", "t", {})
    assert not await approvals.redeem(mine[0], "flood", "t", {"n": 0})  # its own oldest went
    kept = 70 - MAX_PENDING_APPROVALS_PER_SESSION
    assert await approvals.redeem(mine[kept], "flood", "t", {"n": kept})


def test_the_gateway_key_is_made_private_once_and_kept(tmp_path: Path) -> None:
    key = gateway_key(tmp_path / "data")
    assert len(key) == 32
    assert gateway_key(tmp_path / "data") == key
    assert (tmp_path / "data" / GATEWAY_KEY_FILE).stat().st_mode & 0o777 == 0o600


def test_a_gateway_key_readable_by_others_or_malformed_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / GATEWAY_KEY_FILE
    gateway_key(tmp_path)
    os.chmod(path, 0o644)
    with pytest.raises(StoreError, match="readable by other users") as readable:
        gateway_key(tmp_path)
    os.chmod(path, 0o600)
    path.write_text("short")
    with pytest.raises(StoreError, match="is not 32 bytes of hex") as malformed:
        gateway_key(tmp_path)
    assert readable.value.details["store"] == str(path)
    assert "chmod 600" in (readable.value.hint or "")
    assert "remove it" in (malformed.value.hint or "")


async def test_the_embedded_store_refuses_to_start_on_a_key_others_can_read(
    tmp_path: Path,
) -> None:
    gateway_key(tmp_path)
    os.chmod(tmp_path / GATEWAY_KEY_FILE, 0o640)
    with pytest.raises(StoreError, match="readable by other users"):
        async with EmbeddedStore(directory=tmp_path):
            pass
    os.chmod(tmp_path / GATEWAY_KEY_FILE, 0o600)
    async with EmbeddedStore(directory=tmp_path) as store:
        assert store.secret == gateway_key(tmp_path)


async def test_pending_approvals_an_older_release_left_with_a_bare_digest_are_removed(
    tmp_path: Path,
) -> None:
    """An ``approvals.sqlite3`` written before the pending approvals' digests were keyed holds
    bare SHA-256 digests of tool and arguments: they are removed when the file is next used
    (each such approval is asked again), so none stays to confirm a guess."""
    path = tmp_path / APPROVALS_FILE
    bare = call_digest("t", {"token": "s3cr3t"})
    with sqlite3.connect(path) as db:  # the schema and a row as the older release wrote them
        db.execute(
            "CREATE TABLE pending_approvals (nonce TEXT PRIMARY KEY, session_id TEXT NOT "
            "NULL, call TEXT NOT NULL, issued REAL NOT NULL, expires_at REAL NOT NULL)"
        )
        db.execute(
            "INSERT INTO pending_approvals VALUES ('n1', 's1', ?, ?, ?)",
            (bare, time.time(), time.time() + 600),
        )
    db.close()
    approvals = SqliteApprovals(path, ttl_s=600)
    state = await approvals.issue("s1", "t", {"token": "s3cr3t"})
    with sqlite3.connect(path) as db:
        calls = [row[0] for row in db.execute("SELECT call FROM pending_approvals")]
    db.close()
    assert not await approvals.redeem('{"nonce": "n1"}', "s1", "t", {"token": "s3cr3t"})
    assert await approvals.redeem(state, "s1", "t", {"token": "s3cr3t"})
    assert len(calls) == 1
    assert bare not in calls

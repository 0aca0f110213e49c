"""The SQLite audit store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sagents.audit import AuditEntry, SqliteAuditStore, default_audit_path, default_data_dir

pytestmark = pytest.mark.anyio


async def test_entries_round_trip_latest_first(tmp_path: Path) -> None:
    store = SqliteAuditStore(path=tmp_path / "nested" / "audit.sqlite3")
    for n in range(3):
        await store.record(
            AuditEntry(
                kind="gateway_call",
                ts=float(n),
                tool="run_script",
                status="ok",
                session_id="s",
                data={"calls": n, "script": "print('中')"},
            )
        )
    entries = await store.entries(kind="gateway_call", limit=2)
    assert [e.data["calls"] for e in entries] == [2, 1]
    assert entries[0].data["script"] == "print('中')"
    assert entries[0].session_id == "s"


async def test_an_unwritable_store_raises_a_clear_os_or_sqlite_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = SqliteAuditStore(path=blocker / "audit.sqlite3")
    with pytest.raises((OSError, sqlite3.Error)):
        await store.record(AuditEntry(kind="gateway_call", ts=0.0, tool="t", status="ok"))


def test_the_data_dir_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "d"))
    assert default_audit_path() == tmp_path / "d" / "audit.sqlite3"
    monkeypatch.delenv("SAGENTS_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert default_data_dir() == tmp_path / "x" / "sagents"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_data_dir() == tmp_path / "h" / ".local" / "share" / "sagents"

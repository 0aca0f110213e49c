"""The SQLite audit store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from sagents.audit import AuditEntry, SqliteAuditStore, default_audit_path, default_data_dir
from sagents.audit import _store as store_module
from sagents.errors import StoreUnavailableError

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


async def test_an_unwritable_store_raises_a_store_error_naming_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = SqliteAuditStore(path=blocker / "audit.sqlite3")
    with pytest.raises(StoreUnavailableError) as caught:
        await store.record(AuditEntry(kind="gateway_call", ts=0.0, tool="t", status="ok"))
    assert str(blocker / "audit.sqlite3") in str(caught.value)


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


async def test_a_store_keeps_one_connection_until_closed_and_reopens_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[sqlite3.Connection] = []
    real = store_module.connect_private

    def counting(path: Path, **kwargs: bool) -> sqlite3.Connection:
        opened.append(real(path, **kwargs))
        return opened[-1]

    monkeypatch.setattr(store_module, "connect_private", counting)
    store = SqliteAuditStore(path=tmp_path / "audit.sqlite3")
    for n in range(5):
        await store.record(AuditEntry(kind="gateway_call", ts=float(n), tool="t", status="ok"))
    assert len(await store.entries()) == 5
    assert len(opened) == 1
    store.close()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):  # closed, not merely forgotten
        opened[0].execute("SELECT 1")
    assert len(await store.entries()) == 5
    assert len(opened) == 2
    store.close()


async def test_entries_recorded_from_many_threads_at_once_are_all_stored(tmp_path: Path) -> None:
    store = SqliteAuditStore(path=tmp_path / "audit.sqlite3")
    other = SqliteAuditStore(path=tmp_path / "audit.sqlite3")  # another reader, as the console
    async with anyio.create_task_group() as tg:
        for n in range(40):
            entry = AuditEntry(kind="gateway_call", ts=float(n), tool="t", status="ok")
            tg.start_soon(store.record, entry)
    assert sorted(e.ts for e in await other.entries(limit=100)) == [float(n) for n in range(40)]
    store.close()
    other.close()


async def test_a_failed_connection_is_dropped_and_the_next_call_opens_a_new_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.sqlite3"
    store = SqliteAuditStore(path=path)
    await store.record(AuditEntry(kind="gateway_call", ts=0.0, tool="t", status="ok"))
    with sqlite3.connect(path) as admin:
        admin.execute("DROP TABLE audit")
    with pytest.raises(StoreUnavailableError, match="no such table"):
        await store.entries()
    await store.record(AuditEntry(kind="gateway_call", ts=1.0, tool="t", status="ok"))
    assert [e.ts for e in await store.entries()] == [1.0]  # the schema was made again
    store.close()


@pytest.mark.parametrize("how", ["removed", "replaced"])
async def test_an_entry_after_the_file_was_removed_or_replaced_is_not_lost(
    tmp_path: Path, how: str
) -> None:
    """The kept connection follows the file: cleared or rotated by its owner, the next entry
    goes to the file now at the path (a connection to the old one would write nowhere)."""
    path = tmp_path / "audit.sqlite3"
    store = SqliteAuditStore(path=path)
    await store.record(
        AuditEntry(ts=1.0, kind="gateway_call", session_id="s", tool="t", status="ok")
    )
    path.unlink()
    if how == "replaced":
        await SqliteAuditStore(path=path).record(
            AuditEntry(ts=2.0, kind="gateway_call", session_id="s", tool="other", status="ok")
        )
    await store.record(
        AuditEntry(ts=3.0, kind="gateway_call", session_id="s", tool="after", status="ok")
    )
    seen = [e.tool for e in await SqliteAuditStore(path=path).entries()]
    store.close()
    assert seen == (["after"] if how == "removed" else ["after", "other"])

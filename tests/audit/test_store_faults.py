"""The SQLite stores when their disk is full, another process holds the database's exclusive
lock, or the file is not a database: a clear :class:`~sagents.errors.StoreError` each time,
never a raw ``sqlite3`` error, a hang past the busy timeout, or a traceback at start."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from sagents.audit import _store, _tasks
from sagents.audit._store import AuditEntry, SqliteAuditStore, connect_private
from sagents.audit._tasks import SqliteTaskStore
from sagents.cli.main import app
from sagents.errors import StoreError, StoreUnavailableError
from sagents.store._embedded import EmbeddedStore
from tests.small_disk import fill_disk

pytestmark = pytest.mark.anyio

ENTRY = AuditEntry(kind="gateway_call", ts=1.0, tool="run_script", status="ok")
GARBAGE = b"this is not a database, it is an operator's mistake\n" * 100

HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


def traced_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL statements the stores' connections opened from now on run, in order."""
    statements: list[str] = []

    def traced(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
        connection = connect_private(path, check_same_thread=check_same_thread)
        connection.set_trace_callback(statements.append)
        return connection

    monkeypatch.setattr(_store, "connect_private", traced)
    monkeypatch.setattr(_tasks, "connect_private", traced)
    return statements


def busy_budgets_ms(statements: list[str]) -> list[int]:
    """The busy timeouts the statements set (``PRAGMA busy_timeout = N``), in milliseconds.

    Under a lock another process holds for the whole call, each statement after one waits that
    long (a statement refused before it starts is not traced, but has set its budget): their
    sum is how long the call waited for the lock, clock-free.
    """
    return [int(n) for s in statements for n in re.findall(r"PRAGMA busy_timeout = (\d+)", s)]


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Another process holds ``BEGIN EXCLUSIVE`` on ``path`` until the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        assert holder.stdout.readline() == "locked\n"
        try:
            yield
        finally:
            holder.stdin.close()
            holder.wait(timeout=60)


async def test_an_entry_on_a_full_disk_is_a_store_error_and_one_after_space_is_freed_is_written(
    small_disk: Path,
) -> None:
    store = SqliteAuditStore(path=small_disk / "audit.sqlite3")
    await store.record(ENTRY)
    filler = fill_disk(small_disk)
    big = AuditEntry(
        kind="gateway_call", ts=2.0, tool="run_script", status="ok", data={"script": "x" * 65536}
    )
    with pytest.raises(StoreUnavailableError) as caught:
        await store.record(big)
    filler.unlink()
    await store.record(big)
    entries = await store.entries()
    store.close()
    assert "full" in str(caught.value)
    assert str(small_disk / "audit.sqlite3") in str(caught.value)
    assert [entry.ts for entry in entries] == [2.0, 1.0]


async def test_a_new_store_on_a_full_disk_is_a_store_error(small_disk: Path) -> None:
    fill_disk(small_disk)
    with pytest.raises(StoreError) as caught:
        await SqliteAuditStore(path=small_disk / "audit.sqlite3").record(ENTRY)
    tasks = SqliteTaskStore(small_disk / "background.sqlite3")
    with pytest.raises(StoreError):
        tasks.started("t", owner="o", tool="run_script", started_at=1.0)
    assert caught.value.code in ("store_unavailable", "store_error")


async def test_an_exclusive_lock_of_another_process_is_waited_on_once_within_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.sqlite3"
    busy_s = 2.0
    statements = traced_statements(monkeypatch)
    store = SqliteAuditStore(path=path, busy_timeout_s=busy_s)
    fresh = SqliteAuditStore(path=path, busy_timeout_s=busy_s)  # opens (and checks) under the lock
    await store.record(ENTRY)
    with exclusive_lock(path):
        budgets: list[list[int]] = []
        for each in (store, fresh):
            statements.clear()
            with anyio.fail_after(60), pytest.raises(StoreUnavailableError) as caught:
                await each.record(ENTRY)
            budgets.append(busy_budgets_ms(statements))
            assert "locked" in str(caught.value)
    await fresh.record(ENTRY)  # the lock is gone: written
    entries = await store.entries()
    store.close()
    fresh.close()
    assert len(entries) == 2
    # one wait of the busy timeout per call, however many statements it took (the schema
    # check of a new connection included): never twice the timeout, never the connection's
    # own default (a call that set no budget)
    for call in budgets:
        assert call, budgets
        assert sum(call) <= busy_s * 1000, budgets


async def test_the_task_store_waits_on_another_process_lock_once_within_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "background.sqlite3"
    busy_s = 2.0
    statements = traced_statements(monkeypatch)
    tasks = SqliteTaskStore(path, busy_timeout_s=busy_s)
    tasks.started("t1", owner="o", tool="run_script", started_at=1.0)
    with exclusive_lock(path):
        statements.clear()
        with pytest.raises(StoreUnavailableError) as caught:
            tasks.finished("t1", status="ok", result="done", is_error=False)
        budgets = busy_budgets_ms(statements)
    written = tasks.finished("t1", status="ok", result="done", is_error=False)
    assert "locked" in str(caught.value)
    assert budgets  # schema check, update and commit: one timeout in all
    assert sum(budgets) <= busy_s * 1000, budgets
    assert written is True


@pytest.mark.parametrize("name", ["audit.sqlite3", "background.sqlite3"])
async def test_a_garbage_database_file_is_one_clear_error_on_entering_the_store(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_bytes(GARBAGE)
    with pytest.raises(StoreError) as caught:
        async with EmbeddedStore(directory=tmp_path):
            pass
    message = str(caught.value)
    assert "\n" not in message
    assert str(tmp_path / name) in message
    assert "is not a SQLite database" in message
    assert f"mv {tmp_path / name} {tmp_path / name}.broken" in message


def test_serve_with_a_garbage_background_database_refuses_to_start_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "background.sqlite3").write_bytes(GARBAGE)
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(data))
    config = tmp_path / "config.json"
    config.write_text('{"mcpServers": {}}')
    result = CliRunner().invoke(app, ["serve", "--config", str(config)], input="")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    assert str(data / "background.sqlite3") in lines[0]
    assert "mv " in lines[0]

"""What the console reads from disk: run records, the audit store, todo lists.

Every read is bounded (a run's ``output.txt`` and ``script.py`` shown up to
:data:`MAX_SHOWN_BYTES`, ``calls.jsonl`` read one page at a time) and every path is built from
a validated run id (``YYYYmmdd-HHMMSS-<8 hex>``) under a known workspace, opened without
following symlinks: the records are written next to what a script controls.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from sagents.audit._store import AuditEntry
from sagents.gateway._workspaces import Workspaces
from sagents.script._records import RECORDS_DIR

__all__ = [
    "CALLS_PAGE",
    "MAX_SHOWN_BYTES",
    "AuditFilter",
    "RunRecord",
    "filter_audit",
    "find_run",
    "format_number",
    "format_time",
    "list_runs",
    "read_calls",
    "read_shown",
    "read_todo",
    "todo_sessions",
    "valid_run_id",
]

MAX_SHOWN_BYTES = 512 * 1024  # bytes of output.txt / script.py shown on a page (the tail)
CALLS_PAGE = 50  # lines of calls.jsonl on one page
MAX_CALL_LINE = 64 * 1024  # bytes of one calls.jsonl line read; a longer one is skipped
MAX_LISTED_RUNS = 500  # runs listed from disk, newest first
_RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")
_MAX_STATUS_BYTES = 1 << 20


def valid_run_id(value: str) -> bool:
    """Whether ``value`` is a run id (and so safe as a path component)."""
    return _RUN_ID.fullmatch(value) is not None


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One run found on disk.

    Attributes:
        script_id: The run id (its folder's name).
        session_id: The workspace folder's name (the gateway session), "" when shared.
        path: The records folder.
        status: ``status`` of run.json (``running`` while the run goes on).
        started: Unix time the run started, from run.json (None when unknown).
        info: Everything run.json says (calls, failed, exit_code, duration_s...).
    """

    script_id: str
    session_id: str
    path: Path
    status: str
    started: float | None
    info: dict[str, Any] = field(default_factory=dict)


def _read_bounded(path: Path, limit: int) -> tuple[bytes, int]:
    """The last ``limit`` bytes of a regular file (not following a symlink) and its size."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b"", 0
        size = info.st_size
        if size > limit:
            os.lseek(fd, size - limit, os.SEEK_SET)
        chunks: list[bytes] = []
        left = min(size, limit)
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), size
    finally:
        os.close(fd)


def read_shown(path: Path, limit: int = MAX_SHOWN_BYTES) -> tuple[str, bool]:
    """A record file's text as shown (its tail past ``limit`` bytes) and whether it was cut;
    ``("", False)`` when missing."""
    try:
        data, size = _read_bounded(path, limit)
    except OSError:
        return "", False
    return data.decode("utf-8", "replace"), size > limit


def _status(run_dir: Path) -> dict[str, Any]:
    try:
        data, _ = _read_bounded(run_dir / "run.json", _MAX_STATUS_BYTES)
        found = json.loads(data or b"{}")
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _runs_in(workspace: Path, session_id: str) -> Iterator[RunRecord]:
    root = workspace.joinpath(*RECORDS_DIR)
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if not valid_run_id(name) or (root / name).is_symlink():
            continue
        info = _status(root / name)
        started = info.get("started")
        yield RunRecord(
            script_id=name,
            session_id=session_id,
            path=root / name,
            status=str(info.get("status", "unknown")),
            started=float(started) if isinstance(started, int | float) else None,
            info=info,
        )


def list_runs(workspaces: Workspaces) -> list[RunRecord]:
    """The runs recorded in every workspace, newest first (at most 500)."""
    found: list[RunRecord] = []
    for workspace in workspaces.existing():
        session_id = "" if workspaces.shared else workspace.name
        found.extend(_runs_in(workspace, session_id))
    found.sort(key=lambda r: r.script_id, reverse=True)
    return found[:MAX_LISTED_RUNS]


def find_run(workspaces: Workspaces, script_id: str, session_id: str | None) -> RunRecord | None:
    """The run ``script_id`` (in ``session_id``'s workspace when known), or None."""
    if not valid_run_id(script_id):
        return None
    if session_id is not None:
        try:
            candidates = [workspaces.path_for(session_id)]
        except ValueError:
            candidates = []
    else:
        candidates = workspaces.existing()
    for workspace in candidates:
        run_dir = workspace.joinpath(*RECORDS_DIR, script_id)
        if run_dir.is_dir() and not run_dir.is_symlink():
            info = _status(run_dir)
            started = info.get("started")
            return RunRecord(
                script_id=script_id,
                session_id="" if workspaces.shared else workspace.name,
                path=run_dir,
                status=str(info.get("status", "unknown")),
                started=float(started) if isinstance(started, int | float) else None,
                info=info,
            )
    return None


def read_calls(run_dir: Path, page: int) -> tuple[list[dict[str, Any]], bool]:
    """One page (from 0) of ``calls.jsonl``: its lines as objects, and whether more follow."""
    start = max(page, 0) * CALLS_PAGE
    rows: list[dict[str, Any]] = []
    more = False
    try:
        fd = os.open(run_dir / "calls.jsonl", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return rows, False
    with os.fdopen(fd, "rb") as file:
        for number, line in enumerate(_bounded_lines(file)):
            if number < start:
                continue
            if number >= start + CALLS_PAGE:
                more = True
                break
            if line is None:
                rows.append({"summary": f"(a line longer than {MAX_CALL_LINE} bytes, not shown)"})
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = {"summary": line.decode("utf-8", "replace")[:200]}
            rows.append(row if isinstance(row, dict) else {"summary": str(row)[:200]})
    return rows, more


def _bounded_lines(file: BinaryIO) -> Iterator[bytes | None]:
    """The lines of ``file``, each read up to :data:`MAX_CALL_LINE` bytes; None for a longer
    line (the rest of it is skipped, never held whole)."""
    while True:
        line = file.readline(MAX_CALL_LINE + 1)
        if not line:
            return
        if len(line) <= MAX_CALL_LINE or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = file.readline(MAX_CALL_LINE)
        yield None


@dataclass(frozen=True, kw_only=True)
class AuditFilter:
    """The Audit page's filters; empty fields match everything.

    Attributes:
        tool: Exact tool name. status: Exact status. session: Exact session id.
        since: Unix time, entries at or after. until: Unix time, entries at or before.
        search: Case-insensitive text looked for in the description.
    """

    tool: str = ""
    status: str = ""
    session: str = ""
    since: float | None = None
    until: float | None = None
    search: str = ""

    def matches(self, entry: AuditEntry) -> bool:
        """Whether ``entry`` passes every filter."""
        if self.tool and entry.tool != self.tool:
            return False
        if self.status and entry.status != self.status:
            return False
        if self.session and (entry.session_id or "") != self.session:
            return False
        if self.since is not None and entry.ts < self.since:
            return False
        if self.until is not None and entry.ts > self.until:
            return False
        if self.search:
            description = str(entry.data.get("description", ""))
            if self.search.casefold() not in description.casefold():
                return False
        return True


def filter_audit(entries: list[AuditEntry], wanted: AuditFilter, limit: int) -> list[AuditEntry]:
    """The entries (newest first) that pass ``wanted``, at most ``limit``."""
    return [e for e in entries if wanted.matches(e)][:limit]


def _todo_rows(path: Path, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Rows of a read-only query on the todo store's file (none when it is missing or not a
    todo store)."""
    if not path.is_file():
        return []
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error:
        return []
    try:
        return connection.execute(query, params).fetchall()
    except sqlite3.Error:
        return []
    finally:
        connection.close()


def read_todo(path: Path, session_id: str) -> list[dict[str, Any]]:
    """A session's todo list from the built-in todo store's file (empty when none)."""
    rows = _todo_rows(
        path,
        "SELECT id, content, status, owner, blocked_by FROM todos WHERE session_id = ? "
        "ORDER BY position",
        (session_id,),
    )
    return [
        {"id": i, "content": c, "status": s, "owner": o, "blocked_by": b} for i, c, s, o, b in rows
    ]


def todo_sessions(path: Path) -> list[str]:
    """The sessions that have a todo list in the store's file."""
    return [str(r[0]) for r in _todo_rows(path, "SELECT DISTINCT session_id FROM todos", ())]


def format_time(ts: object) -> str:
    """``YYYY-mm-dd HH:MM:SS`` UTC, or "" for None or anything but a number of seconds (a
    record written by another version, or damaged)."""
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        return ""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
    except (OverflowError, OSError, ValueError):
        return ""


def format_number(value: object, spec: str = "g", unit: str = "") -> str:
    """A number as ``format(value, spec)`` followed by `` unit``; "" for anything else (the
    pages never fail on a record's ill-typed field)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    text = format(value, spec)
    return f"{text} {unit}" if unit else text

"""A run's records: ``<workspace>/.agent/scripts/<id>/`` (docs/run_script.md, "Records and audit").

``script.py`` (the script), ``calls.jsonl`` (one line per call: time, tool, arguments, duration,
error or not, a result summary), ``output.txt`` (the full output, stdout and stderr in arrival
order) and ``run.json`` (status, rewritten at the end), all written as the run goes.

What a script controls is bounded here (docs/run_script.md, "Records"): a call's arguments are
kept whole up to :data:`MAX_RECORDED_ARGUMENTS_CHARS` characters of JSON, else replaced by
``{"_truncated": "<their first characters>…", "chars": <their length>}``; ``calls.jsonl`` stops
at :data:`MAX_CALLS_LOG_BYTES` with one last line saying so (the counters in ``run.json`` still
count every call); tool names are at most 128 characters (longer ones are refused by the
protocol) and summaries :data:`SUMMARY_CHARS`.

Every component is opened with ``O_NOFOLLOW`` relative to the descriptor of its parent, and the
files are created (``O_EXCL``) and kept open before the script starts; the host only ever writes
through those descriptors. A script that renames the folder or swaps a symlink in for
``output.txt`` cannot redirect the host's writes; it only moves or hides its own copy. The
sandbox also binds ``.agent/`` read-only.

The records live on the host's filesystem. When workspaces become remote, they will need to be
written through the sandbox's file API instead.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CALLS_BATCH_BYTES",
    "CALLS_BATCH_LINES",
    "CALLS_FLUSH_INTERVAL_S",
    "MAX_CALLS_LOG_BYTES",
    "MAX_RECORDED_ARGUMENTS_CHARS",
    "RECORDS_DIR",
    "SUMMARY_CHARS",
    "TRUNCATED_KEY",
    "CallRecord",
    "ScriptRecords",
    "mark_interrupted_runs",
    "new_script_id",
    "summarize",
]

logger = logging.getLogger(__name__)

RECORDS_DIR = (".agent", "scripts")
SUMMARY_CHARS = 200  # result summary in calls.jsonl, characters
MAX_RECORDED_ARGUMENTS_CHARS = 4096  # a call's arguments in calls.jsonl, as JSON characters
MAX_CALLS_LOG_BYTES = 16 * 1024 * 1024  # calls.jsonl of one run; later calls are not recorded
TRUNCATED_KEY = "_truncated"  # marks arguments cut for calls.jsonl
# calls.jsonl lines are written in batches: when this many are waiting, or this many bytes,
# and at least every CALLS_FLUSH_INTERVAL_S during a run (the runner's timer), and at the end.
CALLS_BATCH_LINES = 256
CALLS_BATCH_BYTES = 64 * 1024
CALLS_FLUSH_INTERVAL_S = 1.0

# Built once (``json.dumps`` with options builds an encoder per call); a string is encoded by
# the C function that ``json.dumps(text, ensure_ascii=False)`` itself uses.
_encode_arguments = json.JSONEncoder(ensure_ascii=False, default=str).encode
_encode_text = json.encoder.encode_basestring

_FILE_NAMES = {
    "script": "script.py",
    "calls": "calls.jsonl",
    "output": "output.txt",
    "run": "run.json",
}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def new_script_id() -> str:
    """A new run id that sorts by time: ``YYYYmmdd-HHMMSS-<8 hex>`` (UTC)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def summarize(text: str, limit: int = SUMMARY_CHARS) -> str:
    """Collapse whitespace and cut ``text`` to ``limit`` characters (with ``…``)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """One line of ``calls.jsonl``.

    Attributes:
        ts: Start of the call, seconds since the Unix epoch.
        tool: The tool's name.
        arguments: The arguments the script sent.
        duration_s: Seconds the call took (0 when refused before it ran).
        is_error: Whether it failed (tool error, refusal, cancellation).
        error_code: The layer's code when the layer refused or failed it, else None.
        summary: The first characters of the result or error text.
    """

    ts: float
    tool: str
    arguments: Mapping[str, Any]
    duration_s: float
    is_error: bool
    error_code: str | None
    summary: str


def _open_dir(parent: int, name: str, *, create: bool, exclusive: bool = False) -> int:
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        except FileExistsError:
            if exclusive:
                raise
    return os.open(name, _DIR_FLAGS, dir_fd=parent)


class ScriptRecords:
    """The open records of one run. Use :meth:`create`; end with :meth:`sync_and_close` (or
    :meth:`close`).

    Writes are synchronous ``os.write`` calls on descriptors opened at creation, never
    redirected by anything the script does to the tree. ``calls.jsonl`` lines are held and
    written in batches (:data:`CALLS_BATCH_LINES`, :data:`CALLS_BATCH_BYTES`, :meth:`flush`):
    a host killed mid-run loses at most the lines not yet written (docs/run_script.md,
    "Records and audit").
    """

    def __init__(self, *, workspace: Path, script_id: str, fds: dict[str, int]) -> None:
        self.workspace = workspace
        self.script_id = script_id
        self._fds = fds
        self._calls_bytes = 0
        self._pending: list[bytes] = []  # calls.jsonl lines not written yet
        self._pending_bytes = 0
        self._failed: dict[str, OSError] = {}  # file key -> its first write error
        self.started: float | None = None  # Unix time the run started (kept in run.json)

    @property
    def relative_dir(self) -> str:
        """The records folder relative to the workspace: ``.agent/scripts/<id>/``."""
        return "/".join((*RECORDS_DIR, self.script_id)) + "/"

    @property
    def path(self) -> Path:
        """The records folder on the host (where it was created)."""
        return self.workspace.joinpath(*RECORDS_DIR, self.script_id)

    @classmethod
    def create(cls, workspace: Path, script_id: str, code: str) -> ScriptRecords:
        """Create the folder and its files, write ``script.py`` and a ``running`` run.json.

        Raises:
            OSError: when a component is a symlink (``ELOOP``/``ENOTDIR``), the run folder
                exists already, or the workspace is not writable.
        """
        fds: dict[str, int] = {}
        opened: list[int] = []
        try:
            current = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            opened.append(current)
            for name in RECORDS_DIR:
                current = _open_dir(current, name, create=True)
                opened.append(current)
            run_dir = _open_dir(current, script_id, create=True, exclusive=True)
            fds["dir"] = run_dir
            for key, name in (
                ("script", "script.py"),
                ("calls", "calls.jsonl"),
                ("output", "output.txt"),
                ("run", "run.json"),
            ):
                fds[key] = os.open(name, _FILE_FLAGS, 0o644, dir_fd=run_dir)
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            raise
        finally:
            for fd in opened:
                os.close(fd)
        records = cls(workspace=workspace, script_id=script_id, fds=fds)
        records._write_all("script", code.encode("utf-8", "surrogatepass"))  # kept open: synced
        if "script" in records._failed:  # never run a script cut short
            records.close()
            raise records._failed["script"]
        records.started = time.time()
        records.write_status({"script_id": script_id, "status": "running"})
        return records

    @property
    def write_failures(self) -> dict[str, str]:
        """The files that could not be written (file name → the first error): a full disk or
        a quota leaves the records incomplete, but never ends the run or loses its result."""
        return {_FILE_NAMES.get(key, key): str(error) for key, error in self._failed.items()}

    def _write_all(self, key: str, data: bytes) -> None:
        if key in self._failed and key != "run":  # appended files: no line after a torn one
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fds[key], view) :]
        except OSError as error:  # ENOSPC, EDQUOT, EIO: noted, the run goes on
            self._failed.setdefault(key, error)

    def write_call(self, record: CallRecord) -> None:
        """Append one line to ``calls.jsonl`` (arguments capped, the file bounded: see the
        module docstring)."""
        if self._calls_bytes >= MAX_CALLS_LOG_BYTES:
            return
        arguments = _encode_arguments(record.arguments)
        if len(arguments) > MAX_RECORDED_ARGUMENTS_CHARS:
            preview = arguments[:MAX_RECORDED_ARGUMENTS_CHARS] + "…"
            arguments = json.dumps({TRUNCATED_KEY: preview, "chars": len(arguments)})
        code = record.error_code
        line = (  # what json.dumps of the dict gives; the arguments are serialised once, above
            f'{{"ts": {record.ts!r}, "tool": {_encode_text(record.tool)}, '
            f'"arguments": {arguments}, "duration_s": {record.duration_s!r}, '
            f'"is_error": {"true" if record.is_error else "false"}, '
            f'"error_code": {"null" if code is None else _encode_text(code)}, '
            f'"summary": {_encode_text(record.summary)}}}\n'
        ).encode("utf-8", "backslashreplace")
        if self._calls_bytes + len(line) > MAX_CALLS_LOG_BYTES:
            note = {"truncated": True, "note": f"calls.jsonl reached {MAX_CALLS_LOG_BYTES} "
                    "bytes: later calls are counted in run.json but not recorded"}  # fmt: skip
            line = (json.dumps(note) + "\n").encode()
            self._calls_bytes = MAX_CALLS_LOG_BYTES
        else:
            self._calls_bytes += len(line)
        self._pending.append(line)
        self._pending_bytes += len(line)
        if len(self._pending) >= CALLS_BATCH_LINES or self._pending_bytes >= CALLS_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the ``calls.jsonl`` lines held so far, in one write (idempotent)."""
        if not self._pending or "calls" not in self._fds:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        self._write_all("calls", data)

    def write_output(self, data: bytes) -> None:
        """Append raw output bytes to ``output.txt``."""
        self._write_all("output", data)

    def write_status(self, status: Mapping[str, Any]) -> None:
        """Replace the content of ``run.json`` (through its open descriptor); it keeps the
        run's ``started`` time (the console's Runs page shows it) unless ``status`` has one."""
        if self.started is not None and "started" not in status:
            status = {"started": self.started, **status}
        fd = self._fds["run"]
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError as error:
            self._failed.setdefault("run", error)
            return
        self._write_all("run", (json.dumps(dict(status), default=str) + "\n").encode())

    def close(self) -> None:
        """Write what is held, then close every descriptor (idempotent)."""
        try:
            self.flush()
        finally:
            fds, self._fds = self._fds, {}
            for fd in fds.values():
                os.close(fd)

    def sync_and_close(self) -> None:
        """Write what is held, make the records durable (``fsync`` of ``script.py``,
        ``calls.jsonl``, ``output.txt``, ``run.json`` and the run's folder), then close
        (idempotent; blocking: run it in a worker thread)."""
        try:
            self.flush()
            for key, fd in self._fds.items():
                try:
                    os.fsync(fd)
                except OSError as error:  # EIO, or a file that cannot be synced: logged
                    logger.warning("run_script %s: %s not synced: %s", self.script_id, key, error)
        finally:
            self.close()


def mark_interrupted_runs(workspace: Path) -> list[str]:
    """Mark runs left ``running`` by a previous process as ``aborted``
    (docs/run_script.md, "Records and audit").

    Call it at startup, before any run starts in ``workspace``: scripts are not resumed after
    a restart, and their records must say so.

    Returns:
        The ids of the runs marked.
    """
    marked: list[str] = []
    # Every component below the workspace is opened with O_NOFOLLOW from its parent's
    # descriptor: a symlinked .agent, scripts/ or run folder never sends the rewrite elsewhere.
    try:
        root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return marked
    try:
        for name in RECORDS_DIR:
            parent, root = root, _open_dir(root, name, create=False)
            os.close(parent)
        names = sorted(os.listdir(root))
        for name in names:
            try:
                run_dir = _open_dir(root, name, create=False)
            except OSError:
                continue
            try:
                if _mark_aborted(run_dir):
                    marked.append(name)
            finally:
                os.close(run_dir)
    except OSError:
        pass
    finally:
        os.close(root)
    return marked


_MAX_STATUS_BYTES = 1 << 20  # a run.json larger than this was not written by a host


def _mark_aborted(run_dir: int) -> bool:
    """Rewrite the regular file ``run.json`` of ``run_dir`` when it says ``running``."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open("run.json", flags, dir_fd=run_dir)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_STATUS_BYTES:
            return False
        with os.fdopen(fd, "r+", encoding="utf-8", closefd=False) as file:
            try:
                status = json.load(file)
            except ValueError:
                return False
            if not isinstance(status, dict) or status.get("status") != "running":
                return False
            status["status"] = "aborted"
            status["note"] = "the host restarted while the script ran; it was not resumed"
            file.seek(0)
            file.truncate()
            json.dump(status, file)
            return True
    finally:
        os.close(fd)

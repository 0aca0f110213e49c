"""What a gateway does at start-up about the work a previous process left unfinished.

Runs are never resumed (docs/run_script.md). When ``sagents serve`` starts:

- every run_script run whose ``run.json`` still says ``running``, in every session workspace
  under the root, is marked ``aborted`` with the reason, and gets its one ``gateway_call``
  audit entry (status ``aborted``, ``reason`` in its data);
- every background task the store holds as ``running`` becomes ``failed`` with reason
  :data:`RESTART_REASON`, so ``script_status`` answers for it; the owner, when it can be
  identified (a bearer token, or the one local client of stdio), is told once when it
  reconnects (a ``background.done`` log notification with status ``failed``).

Several gateways may share a workspace root or a data dir (two MCP clients that each start
``sagents serve``). A gateway sweeps only when it is the only one: each holds a shared
``flock`` on :data:`LOCK_NAME` while it runs (the kernel drops it when the process dies, even
by SIGKILL), and the sweep runs only when an exclusive lock can be taken at start; otherwise
the runs of a dead gateway are swept by the next start that finds itself alone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

from sagents.audit._store import AuditEntry, AuditStore
from sagents.audit._tasks import SqliteTaskStore, StoredTask
from sagents.errors import StoreError
from sagents.gateway._workspaces import Workspaces
from sagents.script._records import RECORDS_DIR, mark_interrupted_runs
from sagents.store._embedded import SqliteTasks
from sagents.store._protocols import TaskStore

__all__ = ["LOCK_NAME", "RESTART_REASON", "StartupLock", "sweep_runs", "sweep_tasks"]

logger = logging.getLogger(__name__)

LOCK_NAME = ".sagents-gateway.lock"
RESTART_REASON = "gateway restarted"


class StartupLock:
    """A shared lock on ``<directory>/.sagents-gateway.lock`` held while the gateway runs.

    Args:
        directory: The directory gateways share (a workspace root, a data dir).
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; True when no other gateway holds it (this one may sweep)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as error:  # e.g. replaced by a symlink: never follow it, never sweep
            logger.warning("cannot open %s (%s): interrupted work is not swept", self.path, error)
            return False
        alone = True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            alone = False
        fcntl.flock(fd, fcntl.LOCK_SH)  # held for the gateway's lifetime
        self._fd = fd
        return alone

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


async def sweep_runs(workspaces: Workspaces, audit: AuditStore | None) -> list[str]:
    """Mark the interrupted runs of every workspace ``aborted`` and audit each.

    Returns:
        The records directories marked, relative to the root.
    """
    marked: list[str] = []
    for workspace in workspaces.existing():
        session = None if workspaces.shared else workspace.name
        for script_id in mark_interrupted_runs(workspace):
            records = Path(*RECORDS_DIR, script_id)
            marked.append(str(workspace.relative_to(workspaces.root) / records))
            if audit is None:
                continue
            entry = AuditEntry(
                kind="gateway_call",
                ts=time.time(),
                tool="run_script",
                status="aborted",
                session_id=session,
                data={
                    "script_id": script_id,
                    "reason": RESTART_REASON,
                    "records_dir": str(records),
                },
            )
            try:
                await audit.record(entry)
            except StoreError as error:  # the run's records say 'aborted' all the same
                logger.warning("run %s marked aborted; audit not written: %s", records, error)
    if marked:
        logger.warning("runs interrupted by a restart, marked aborted: %s", ", ".join(marked))
    return marked


async def sweep_tasks(store: TaskStore | SqliteTaskStore) -> list[StoredTask]:
    """Mark the background tasks a previous process left running ``failed``."""
    tasks = SqliteTasks(store) if isinstance(store, SqliteTaskStore) else store
    failed = await tasks.mark_interrupted(RESTART_REASON)
    if failed:
        logger.warning(
            "background calls interrupted by a restart, now failed: %s",
            ", ".join(task.task_id for task in failed),
        )
    return failed

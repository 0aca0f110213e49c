"""Background calls' stored results charged to ``quotas.workspaceBytes`` and
``quotas.principalBytes`` (docs/configuration.md, "quotas").

Before the task store keeps a handed-off call's result, its size is checked against what the
session's workspace and task logs hold on disk plus the results already kept for it (and the
same over every session of its principal); a result that fits is charged in a ledger::

    <data dir>/task-results/<session id>    one line per kept result: its bytes

The ledger lives in the data dir, which no sandbox binds, and outlives the session and the
gateway, as the stored results do.
"""

from __future__ import annotations

import logging
import os
from contextlib import suppress
from pathlib import Path

import anyio
import anyio.to_thread

from sagents.config._loader import QuotaSettings
from sagents.gateway._principals import PrincipalSessions
from sagents.gateway._workspaces import Workspaces
from sagents.sandbox._diskuse import directory_usage_bytes

__all__ = ["PRINCIPAL_SETTING", "RESULTS_DIR", "WORKSPACE_SETTING", "StoredResultQuota"]

logger = logging.getLogger(__name__)

RESULTS_DIR = "task-results"
WORKSPACE_SETTING = "quotas.workspaceBytes"
PRINCIPAL_SETTING = "quotas.principalBytes"


class StoredResultQuota:
    """Charges stored results to their session's and principal's quotas.

    Args:
        data_dir: The gateway's data dir.
        quotas: The ``quotas`` settings.
        workspaces: The sessions' workspace layout.
        principals: The sessions of each principal.
        logs_dir: The directory holding each session's task logs.
    """

    def __init__(
        self,
        data_dir: Path,
        quotas: QuotaSettings,
        workspaces: Workspaces,
        principals: PrincipalSessions,
        logs_dir: Path,
    ) -> None:
        self._root = data_dir / RESULTS_DIR
        self._quotas = quotas
        self._workspaces = workspaces
        self._principals = principals
        self._logs_dir = logs_dir
        self._lock = anyio.Lock()  # one charge at a time: two results cannot both fit

    async def charge(self, session_id: str, principal: str, size: int) -> str | None:
        """Charge ``size`` bytes of a result kept for ``session_id``.

        Returns:
            None when charged (or when the data dir cannot be read or written: the result is
            then kept uncharged, and the failure logged, rather than lost); else the setting
            the result would pass (nothing charged).
        """
        if self._quotas.workspace_bytes is None and self._quotas.principal_bytes is None:
            return None
        async with self._lock:
            try:
                return await anyio.to_thread.run_sync(self._charge, session_id, principal, size)
            except (OSError, ValueError) as error:
                logger.warning("a result of session %s is kept uncharged: %s", session_id, error)
                return None

    def _charge(self, session_id: str, principal: str, size: int) -> str | None:
        limit = self._quotas.workspace_bytes
        if limit is not None:
            sessions = self._all_sessions() if self._workspaces.shared else [session_id]
            if self._used(sessions) + size > limit:
                return WORKSPACE_SETTING
        limit = self._quotas.principal_bytes
        if limit is not None:
            self._principals.register(principal, session_id)
            if self._used(self._principals.sessions(principal)) + size > limit:
                return PRINCIPAL_SETTING
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        ledger = os.open(
            self._root / session_id,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            os.write(ledger, f"{size}\n".encode())
        finally:
            os.close(ledger)
        return None

    def workspace_kept_bytes(self, session_id: str) -> int:
        """What the results kept for ``session_id``'s workspace hold (every session's when the
        workspace is shared): the sandbox counts them against ``quotas.workspaceBytes`` beside
        its files (``SandboxParams.charged_bytes``). Blocking; 0 when the ledger cannot be
        read (logged)."""
        sessions = self._all_sessions() if self._workspaces.shared else [session_id]
        return self._kept_quietly(sessions)

    def principal_kept_bytes(self, principal: str) -> int:
        """What the results kept for every session of ``principal`` hold
        (``SharedQuota.charged_bytes`` of ``quotas.principalBytes``). Blocking; 0 when the
        ledger cannot be read (logged)."""
        return self._kept_quietly(self._principals.sessions(principal))

    def _kept_quietly(self, sessions: list[str]) -> int:
        try:
            return sum(self._kept(session_id) for session_id in sessions)
        except OSError as error:
            logger.warning("the results kept for %s are not counted: %s", sessions, error)
            return 0

    def _used(self, sessions: list[str]) -> int:
        """What the sessions' workspaces, task logs and kept results hold (each directory
        once: a shared workspace is one)."""
        directories: set[str] = set()
        for session_id in sessions:
            directories.add(os.path.realpath(self._workspaces.path_for(session_id)))
            directories.add(os.path.realpath(self._logs_dir / session_id))
        used = 0
        for directory in directories:
            with suppress(FileNotFoundError, NotADirectoryError):
                used += directory_usage_bytes(directory)
        return used + sum(self._kept(session_id) for session_id in sessions)

    def _kept(self, session_id: str) -> int:
        """The bytes of the results kept for ``session_id`` (its ledger)."""
        try:
            text = (self._root / session_id).read_text()
        except FileNotFoundError:
            return 0
        return sum(int(line) for line in text.split() if line.isdigit())

    def _all_sessions(self) -> list[str]:
        try:
            return sorted(os.listdir(self._root))
        except FileNotFoundError:
            return []

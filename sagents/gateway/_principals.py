"""Which sessions' workspaces belong to which principal, kept on disk for
``quotas.principalBytes`` (docs/configuration.md; docs/security.md, "Sandbox").

A principal is who a session's credential says it is: one bearer token (its non-secret
identity), or every client without a token together. The gateway puts it in each call's
``SessionContext.trusted`` under :data:`PRINCIPAL_KEY`; the sandbox of a session is then held to
the principal's quota together with every other workspace of that principal, including those
of sessions that ended or ran before a restart::

    <data dir>/principals/<principal>/<session id>    an empty file: the session is its

The registry lives in the data dir, which no sandbox binds, so no session can take its
workspace out of the count.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from sagents.gateway._workspaces import Workspaces
from sagents.tool._context import PRINCIPAL_KEY

__all__ = ["PRINCIPAL_KEY", "PrincipalSessions"]


PRINCIPALS_DIR = "principals"
_ANONYMOUS = "anonymous"  # every client without a token
_SESSION_ID = re.compile(r"[0-9a-f]{32}")


class PrincipalSessions:
    """The sessions of each principal, under ``<data dir>/principals``.

    Args:
        data_dir: The gateway's data dir.
        workspaces: The sessions' workspace layout.
        logs_dir: The directory holding each session's task logs (``<logs_dir>/<session id>``).
    """

    def __init__(self, data_dir: Path, workspaces: Workspaces, logs_dir: Path) -> None:
        self._root = data_dir / PRINCIPALS_DIR
        self._workspaces = workspaces
        self._logs_dir = logs_dir

    def register(self, principal: str, session_id: str) -> None:
        """Record that ``session_id`` belongs to ``principal`` (blocking; idempotent)."""
        folder = self._root / _folder_name(principal)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker = os.open(
            folder / session_id, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        os.close(marker)

    def sessions(self, principal: str) -> list[str]:
        """The ids of every session of ``principal`` that this data dir knows (blocking)."""
        folder = self._root / _folder_name(principal)
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            return []
        return [name for name in names if _SESSION_ID.fullmatch(name)]

    def directories(self, principal: str) -> list[str]:
        """The workspaces and task-log directories of every session of ``principal`` that
        this data dir knows (blocking)."""
        found: list[str] = []
        for name in self.sessions(principal):
            found.append(str(self._workspaces.path_for(name)))
            found.append(str(self._logs_dir / name))
        return found


def _folder_name(principal: str) -> str:
    if not principal:
        return _ANONYMOUS
    if _SESSION_ID.fullmatch(principal):
        return principal  # a token's identity: 32 hex digits already
    return hashlib.sha256(principal.encode()).hexdigest()[:32]

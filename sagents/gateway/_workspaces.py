"""Where each client session of ``sagents serve`` keeps its files and run records.

By default every client session gets a workspace of its own under the root
(``--workspace DIR``, else ``<data dir>/workspaces``)::

    <root>/sessions/<session id>/            the session's sandbox workspace
    <root>/sessions/<session id>/.agent/scripts/<run id>/   its run_script records

A session's sandbox binds only its own directory, so a script (or a built-in file or shell
tool) of one session can neither read another session's records nor plant a module another
session's script would import. Session ids are random (128 bits) and never derived from
client input. Sessions of different profiles are different sessions, so they never share one.

``shared=True`` (``--shared-workspace``) makes the root itself the workspace of every session,
as one folder: every client then reads and writes every other client's files and records.
Choose it only when every client is the same trusted user (docs/gateway.md, "Threat model").
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["SESSIONS_DIR", "Workspaces"]

SESSIONS_DIR = "sessions"
"""Sub-directory of the root holding one directory per session."""

_SESSION_ID = re.compile(r"[0-9a-f]{32}")


class Workspaces:
    """The layout of the sessions' workspaces under one root.

    Args:
        root: The root directory (created on first use, mode 0700).
        shared: Every session uses ``root`` itself (trusted users only).
    """

    def __init__(self, root: Path, *, shared: bool = False) -> None:
        self.root = root
        self.shared = shared

    def path_for(self, session_id: str) -> Path:
        """The workspace directory of ``session_id`` (not created).

        Raises:
            ValueError: ``session_id`` is not a gateway session id (32 hex digits).
        """
        if self.shared:
            return self.root
        if _SESSION_ID.fullmatch(session_id) is None:
            raise ValueError(f"not a gateway session id: {session_id!r}")
        return self.root / SESSIONS_DIR / session_id

    def for_session(self, session_id: str) -> Path:
        """The workspace directory of ``session_id``, created (mode 0700) if missing.

        Raises:
            ValueError: see :meth:`path_for`.
        """
        path = self.path_for(session_id)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    def bound_area(self) -> Path:
        """The directory under which sessions' sandboxes bind their workspace: the root when
        shared, else ``<root>/sessions``. Nothing else of the host must live there."""
        return self.root if self.shared else self.root / SESSIONS_DIR

    def existing(self) -> list[Path]:
        """Every workspace that exists now (the shared root, or each session's), sorted."""
        if self.shared:
            return [self.root] if self.root.is_dir() else []
        sessions = self.root / SESSIONS_DIR
        if not sessions.is_dir():
            return []
        return sorted(p for p in sessions.iterdir() if p.is_dir() and _SESSION_ID.fullmatch(p.name))

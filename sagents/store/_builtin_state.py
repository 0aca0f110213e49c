"""The state of the built-in memory and todo tools, as a store keeps it: the values and the
backend protocols (docs/builtin_tools.md). A shared store (PostgreSQL) implements the backends
(:mod:`sagents.store._postgres_state`); without one, the tools keep their own SQLite files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Protocol

from sagents.audit import AuditEntry

__all__ = [
    "STATUSES",
    "USER_SCOPE",
    "DeleteAudit",
    "Memory",
    "MemoryBackend",
    "Merge",
    "Scope",
    "Status",
    "TodoBackend",
    "TodoItem",
    "WriteAudit",
    "memory_digest",
    "merge_found",
]

Scope = Literal["agent", "user"]
USER_SCOPE = "*"
"""The agent column of memories shared by all of a user's agents."""


@dataclass(frozen=True, kw_only=True)
class Memory:
    """One stored memory (``created``/``updated``: seconds since the Unix epoch)."""

    id: str
    content: str
    tags: tuple[str, ...]
    scope: Scope
    created: float
    updated: float
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON object of the memory."""
        data = asdict(self)
        data["tags"] = list(self.tags)
        if self.score is None:
            del data["score"]
        return data


def memory_digest(content: str) -> str:
    """What deduplicates memories of one scope: the text, case and spacing folded (SHA-256)."""
    normal = " ".join(content.casefold().split())
    return hashlib.sha256(normal.encode()).hexdigest()


def merge_found(*lists: Sequence[Memory]) -> list[Memory]:
    """One list of the memories of several searches (full-text, substring): a memory found by
    several has the sum of its scores; best first, then the most recently updated."""
    merged: dict[str, Memory] = {}
    for found in lists:
        for memory in found:
            known = merged.get(memory.id)
            score = (memory.score or 0.0) + (known.score or 0.0 if known else 0.0)
            merged[memory.id] = replace(memory, score=round(score, 6))
    return sorted(merged.values(), key=lambda m: (-(m.score or 0.0), -m.updated))


WriteAudit = Callable[["Memory", bool], AuditEntry]
"""The audit row of a memory written (``created``: False when merged into one of the same
text), made from the write's result and kept with it."""

DeleteAudit = Callable[["Memory"], AuditEntry]
"""The audit row of a memory deleted, made from it and kept with the deletion."""


class MemoryBackend(Protocol):
    """Where memories live when not in the SQLite file (the PostgreSQL store of replicas).

    Every method gets the user and the agent column(s) already resolved by
    :func:`scope_of`; content and tags are already checked. A write and its ``audit`` row are
    kept together or not at all (one transaction), in the backend's own store's audit.
    """

    async def store(
        self,
        user: str,
        agent: str,
        content: str,
        tags: tuple[str, ...],
        max_per_scope: int,
        *,
        audit: WriteAudit | None = None,
    ) -> tuple[Memory, bool]:
        """Insert, or merge the tags into the scope's memory of the same digest, with
        ``audit``'s row.

        Raises:
            QuotaExceededError: the scope already holds ``max_per_scope`` memories.
            StoreError: the store (then nothing was kept).
        """
        ...

    async def search(
        self,
        user: str,
        agents: Sequence[str],
        words: Sequence[str],
        limit: int,
        runs: Sequence[str] = (),
    ) -> list[Memory]:
        """Memories of ``user`` in ``agents`` matching any of ``words`` (full-text) or
        containing any of ``runs`` (CJK, :func:`query_terms`), best first."""
        ...

    async def delete(
        self,
        user: str,
        agents: Sequence[str],
        memory_id: str,
        *,
        audit: DeleteAudit | None = None,
    ) -> Memory | None:
        """Delete one memory of ``user`` in ``agents``, with ``audit``'s row; None when there
        is none."""
        ...


Status = Literal["pending", "in_progress", "done", "cancelled"]
STATUSES: tuple[Status, ...] = ("pending", "in_progress", "done", "cancelled")


@dataclass(frozen=True, kw_only=True)
class TodoItem:
    """One task of a session's list."""

    id: str
    content: str
    status: Status = "pending"
    owner: str | None = None
    blocked_by: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON object of the item."""
        return {
            "id": self.id,
            "content": self.content,
            "status": self.status,
            "owner": self.owner,
            "blocked_by": list(self.blocked_by),
        }


Merge = Callable[[list[TodoItem]], list[TodoItem]]
"""Turns a session's current list into its new one (raises to change nothing)."""


class TodoBackend(Protocol):
    """Where task lists live when not in the SQLite file (the PostgreSQL store of replicas)."""

    async def read(self, session_id: str) -> list[TodoItem]:
        """The session's list, in order."""
        ...

    async def write(self, session_id: str, merge: Merge) -> list[TodoItem]:
        """Apply ``merge`` to the session's list, one writer at a time; the new list."""
        ...

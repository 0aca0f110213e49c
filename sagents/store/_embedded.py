"""The embedded store of one gateway process: SQLite files in the data directory, and memory
for what never outlives the process (session grants).

This is the default of ``sagents serve``. The SQLite stores themselves live in
:mod:`sagents.audit`; this module gives them the async interfaces of
:mod:`sagents.store._protocols`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from sagents.audit._store import AUDIT_FILE, SqliteAuditStore, default_data_dir
from sagents.audit._tasks import SqliteTaskStore, StoredTask
from sagents.errors import StoreUnavailableError
from sagents.store._agents import AGENTS_FILE, SqliteAgentStore
from sagents.store._builtin_state import MemoryBackend, TodoBackend
from sagents.store._fair import FairMap
from sagents.store._held import HeldApproval, MemoryHeld
from sagents.store._logins import LOGINS_FILE, SqliteLogins
from sagents.store._pins import PINS_FILE, SqlitePins
from sagents.store._protocols import CancelHandler, SettledHandler

__all__ = [
    "MAX_PENDING_APPROVALS",
    "MAX_PENDING_APPROVALS_PER_SESSION",
    "REQUEST_STATE_TTL_S",
    "ApprovalStates",
    "EmbeddedStore",
    "MemoryApprovals",
    "SqliteTasks",
    "approval_key",
    "call_digest",
    "keyed_call_digest",
    "nonce_of",
]

REQUEST_STATE_TTL_S = 600.0
"""Seconds an approval's ``requestState`` stays valid (the time a user has to answer)."""
MAX_PENDING_APPROVALS = 1024
"""Approvals asked and not yet answered that are kept; past it the oldest of the session that
holds the most can no longer be answered (it is asked again), so memory stays bounded."""
MAX_PENDING_APPROVALS_PER_SESSION = 64
"""Of those, kept for one session: a 2026-07-28 session is one per token and profile (docs/
gateway.md, "Threat model"), so one client cannot push out the others' pending approvals."""

logger = logging.getLogger(__name__)

TASKS_FILE = "background.sqlite3"


def call_digest(tool: str, arguments: Mapping[str, Any]) -> str:
    """The tool and its arguments, SHA-256 (hex): the same call gives the same digest (the
    arguments' order aside). Bare, it confirms a guess of an argument to whoever reads it:
    what a store keeps is :func:`keyed_call_digest`."""
    payload = json.dumps([tool, dict(arguments)], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def approval_key(secret: bytes) -> bytes:
    """The key binding approvals to their client and call, derived from a store's secret
    (``gateway.key``, or the replicas' shared one)."""
    return hashlib.sha256(b"approval" + secret).digest()


def keyed_call_digest(key: bytes, tool: str, arguments: Mapping[str, Any]) -> str:
    """What an approval kept in a store is bound to: :func:`call_digest` keyed with ``key``
    (:func:`approval_key`; HMAC-SHA256, hex), so that a row read from the store cannot confirm
    a guess of an argument (a secret redacted from the card)."""
    digest = call_digest(tool, arguments)
    return hmac.new(key, digest.encode(), hashlib.sha256).hexdigest()


def nonce_of(state: str | None) -> str | None:
    """The nonce inside a ``requestState`` payload (``{"nonce": ...}``), or None."""
    try:
        nonce = json.loads(state or "")["nonce"]
    except (ValueError, KeyError, TypeError):
        return None
    return nonce if isinstance(nonce, str) else None


@dataclass(frozen=True)
class _Pending:
    session_id: str
    call: str
    expires_at: float


class ApprovalStates:
    """Nonces of pending approvals, in memory: minted for one session and call, redeemed once.

    Args:
        clock: Seconds, monotonic (tests pass their own).
        ttl_s: Seconds a nonce stays redeemable.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, ttl_s: float = REQUEST_STATE_TTL_S
    ) -> None:
        self._clock = clock
        self.ttl_s = ttl_s
        """Seconds a nonce stays redeemable (``approvals.timeoutSec``)."""
        self._pending: FairMap[str, _Pending] = FairMap(
            limit=MAX_PENDING_APPROVALS, per_owner=MAX_PENDING_APPROVALS_PER_SESSION
        )

    def issue(self, session_id: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """A new state for asking ``session_id`` to approve this call."""
        self._prune()
        nonce = secrets.token_urlsafe(18)
        pending = _Pending(session_id, call_digest(tool, arguments), self._clock() + self.ttl_s)
        self._pending.put(nonce, pending, session_id)
        return json.dumps({"nonce": nonce})

    def redeem(
        self, state: str | None, session_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> bool:
        """Whether ``state`` is a pending approval of this session and call (then spent)."""
        self._prune()
        nonce = nonce_of(state)
        pending = self._pending.get(nonce) if nonce is not None else None
        if pending is None or nonce is None:
            return False
        if pending.session_id != session_id or pending.call != call_digest(tool, arguments):
            return False
        self._pending.pop(nonce)
        return True

    def _prune(self) -> None:
        now = self._clock()
        for nonce in [n for n, p in self._pending.items() if p.expires_at <= now]:
            self._pending.pop(nonce)


class MemoryApprovals:
    """The :class:`~sagents.store._protocols.ApprovalStore` of one process (nothing persists:
    the ``requestState`` seal's key is per process too, so a restart refuses old states).

    Args:
        states: The pending nonces (a new :class:`ApprovalStates` when None).
    """

    def __init__(self, states: ApprovalStates | None = None) -> None:
        self.states = states or ApprovalStates()
        self._grants: dict[str, set[str]] = {}
        self._held = MemoryHeld(time.time)

    async def issue(self, session_id: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """See :meth:`ApprovalStates.issue`."""
        return self.states.issue(session_id, tool, arguments)

    async def redeem(
        self, state: str | None, session_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> bool:
        """See :meth:`ApprovalStates.redeem`."""
        return self.states.redeem(state, session_id, tool, arguments)

    @property
    def ttl_s(self) -> float:
        """Seconds a pending approval stays redeemable."""
        return self.states.ttl_s

    @ttl_s.setter
    def ttl_s(self, value: float) -> None:
        self.states.ttl_s = value

    async def grant(self, session_id: str, tool: str) -> None:
        """Remember the grant in memory."""
        self._grants.setdefault(session_id, set()).add(tool)

    async def granted(self, session_id: str) -> frozenset[str]:
        """The session's grants."""
        return frozenset(self._grants.get(session_id, ()))

    async def hold(self, held: HeldApproval) -> None:
        """See ``ApprovalStore.hold`` (in memory)."""
        self._held.hold(held)

    async def release(self, approval_id: str) -> None:
        """See ``ApprovalStore.release``."""
        self._held.release(approval_id)

    async def held(self) -> list[HeldApproval]:
        """See ``ApprovalStore.held``."""
        return self._held.held()

    async def settle(self, approval_id: str, answer: str) -> bool:
        """See ``ApprovalStore.settle``."""
        return self._held.settle(approval_id, answer, self.ttl_s)

    async def take(self, binding: str, call: str) -> str | None:
        """See ``ApprovalStore.take``."""
        return self._held.take(binding, call)

    def on_settled(self, handler: SettledHandler | None) -> None:
        """Nothing to hear: one process records and takes its own answers."""


class SqliteTasks:
    """The :class:`~sagents.store._protocols.TaskStore` of one process, on a
    :class:`~sagents.audit._tasks.SqliteTaskStore` (each call in a worker thread: a lock
    another process holds is waited on there, not in the event loop).

    Args:
        store: The SQLite task store.
    """

    shared = False

    def __init__(self, store: SqliteTaskStore) -> None:
        self.sqlite = store

    @property
    def path(self) -> Path:
        """The database file (its folder holds the start-up lock)."""
        return self.sqlite.path

    async def started(self, task_id: str, *, owner: str, tool: str, started_at: float) -> None:
        """See :meth:`SqliteTaskStore.started`."""
        await anyio.to_thread.run_sync(
            partial(self.sqlite.started, task_id, owner=owner, tool=tool, started_at=started_at)
        )

    async def finished(
        self, task_id: str, *, status: str, result: str, is_error: bool, reason: str | None = None
    ) -> bool:
        """See :meth:`SqliteTaskStore.finished`."""
        return await anyio.to_thread.run_sync(
            partial(
                self.sqlite.finished,
                task_id,
                status=status,
                result=result,
                is_error=is_error,
                reason=reason,
            )
        )

    async def mark_interrupted(self, reason: str) -> list[StoredTask]:
        """See :meth:`SqliteTaskStore.mark_interrupted`."""
        return await anyio.to_thread.run_sync(self.sqlite.mark_interrupted, reason)

    async def get(self, task_id: str) -> StoredTask | None:
        """See :meth:`SqliteTaskStore.get`."""
        return await anyio.to_thread.run_sync(self.sqlite.get, task_id)

    async def owned(self, owner: str) -> list[StoredTask]:
        """See :meth:`SqliteTaskStore.owned`."""
        return await anyio.to_thread.run_sync(self.sqlite.owned, owner)

    async def take_unannounced(self, owner: str) -> list[StoredTask]:
        """See :meth:`SqliteTaskStore.take_unannounced`."""
        return await anyio.to_thread.run_sync(self.sqlite.take_unannounced, owner)

    async def request_cancel(self, task_id: str) -> bool:
        """No other process shares this store: nobody to ask."""
        return False

    def on_cancel(self, handler: CancelHandler | None) -> None:
        """Nothing arrives from other processes."""


@dataclass(kw_only=True)
class EmbeddedStore:
    """Every kind of state of one gateway process (``sagents serve`` without ``--store``):
    the audit, background tasks, pinned tool definitions and pending approvals in SQLite
    files (session grants in memory).

    Attributes:
        directory: Where the SQLite files are (the data directory by default).
    """

    directory: Path = field(default_factory=default_data_dir)
    shared = False
    replica_id = "local"
    secret: bytes | None = None
    """Key material that outlives the process (``gateway.key``, read on entering): it seals
    ``requestState`` and binds a pending approval to its client's token and profile, so that a
    2026-07-28 approval survives a restart."""
    memory: MemoryBackend | None = None
    """The memory tools keep their own SQLite file (``memory.sqlite3``) beside this store's."""
    todos: TodoBackend | None = None
    """The todo tools keep their own SQLite file (``todo.sqlite3``) beside this store's."""

    def __post_init__(self) -> None:
        from sagents.store._sqlite_approvals import APPROVALS_FILE, SqliteApprovals

        self.audit = SqliteAuditStore(path=self.directory / AUDIT_FILE)
        self.tasks = SqliteTasks(SqliteTaskStore(self.directory / TASKS_FILE))
        self.approvals = SqliteApprovals(self.directory / APPROVALS_FILE, ttl_s=REQUEST_STATE_TTL_S)
        self.pins = SqlitePins(self.directory / PINS_FILE)
        self.logins = SqliteLogins(self.directory / LOGINS_FILE)
        self.agents = SqliteAgentStore(path=self.directory / AGENTS_FILE)

    async def __aenter__(self) -> EmbeddedStore:
        """Check both files: one that is not a database stops the start with a one-line
        ``StoreError`` naming it; one that cannot be written now (a full disk, a lock) is
        logged, and each run then says that its audit row was not written.

        Raises:
            StoreError: a file that is not a SQLite database; the key file is readable by
                others, malformed or cannot be made.
        """
        from sagents.store._sqlite_approvals import gateway_key

        self.secret = await anyio.to_thread.run_sync(gateway_key, self.directory)
        for check in (self.audit.check, self.tasks.sqlite.check, self.pins.check):
            try:
                await anyio.to_thread.run_sync(check)
            except StoreUnavailableError as error:
                logger.warning("the store is not usable now: %s", error)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with anyio.CancelScope(shield=True):  # the audit's connection, kept since its first use
            await anyio.to_thread.run_sync(self.audit.close)

    def holds(self, session_id: str) -> bool:
        """Whether a legacy session could live on another process (never, embedded)."""
        return True

    async def replica_alive(self, replica_id: str) -> bool:
        """Only this process is alive (see ``GatewayStore.replica_alive``)."""
        return replica_id == self.replica_id

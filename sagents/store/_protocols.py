"""The store seams: one async interface per kind of shared state (docs/scale-out.md).

Each has an embedded implementation (:mod:`sagents.store._embedded`: SQLite files, or memory for
what never outlives a process) and a PostgreSQL one (:mod:`sagents.store._postgres`); the
conformance suite in ``tests/store`` runs against both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from sagents.audit._store import AuditEntry, AuditKind
from sagents.audit._tasks import StoredTask
from sagents.store._held import HeldApproval
from sagents.store._logins import SealedLogin
from sagents.store._pins import ToolPin

__all__ = [
    "AgentStore",
    "ApprovalStore",
    "AuditLog",
    "CancelHandler",
    "LoginStore",
    "PinStore",
    "SettledHandler",
    "TaskStore",
]

CancelHandler = Callable[[str], Awaitable[None]]
"""Called with a task id when another replica asks for that task to be cancelled."""
SettledHandler = Callable[[str], Awaitable[None]]
"""Called with a held approval's id when another gateway process recorded its answer."""


class AuditLog(Protocol):
    """Audit rows: written by every replica, read back latest first.

    Every method of every store seam raises :class:`~sagents.errors.StoreError` (never its
    driver's errors): ``StoreUnavailableError`` when the store is out of reach now.
    """

    async def record(self, entry: AuditEntry) -> None:
        """Store one entry."""
        ...

    async def entries(self, *, kind: AuditKind | None = None, limit: int = 100) -> list[AuditEntry]:
        """The latest entries first, optionally of one kind."""
        ...


class TaskStore(Protocol):
    """Background calls handed off by a gateway (see ``sagents.audit._tasks`` for the fields).

    Attributes:
        shared: True when other gateway processes use the same store at the same time
            (replicas): running tasks are then swept by lease, not at start-up, and a cancel
            can reach the replica that runs a task.
    """

    shared: bool

    async def started(self, task_id: str, *, owner: str, tool: str, started_at: float) -> None:
        """Record a task handed off to the background (by this process)."""
        ...

    async def finished(
        self, task_id: str, *, status: str, result: str, is_error: bool, reason: str | None = None
    ) -> bool:
        """Record how a task ended (``reason`` when the gateway, not a client, ended it).

        A terminal status is written once (compare-and-set on ``running``): False when the
        task had already ended (a sweep marked it ``failed``), whose status then stays.
        """
        ...

    async def mark_interrupted(self, reason: str) -> list[StoredTask]:
        """Mark the tasks of processes that are gone ``failed``; returns them, as marked.

        Embedded: every ``running`` task (called only by a gateway that is alone). Shared: the
        tasks of replicas whose lease expired.
        """
        ...

    async def get(self, task_id: str) -> StoredTask | None:
        """One task, or None."""
        ...

    async def owned(self, owner: str) -> list[StoredTask]:
        """The tasks of ``owner``, oldest first (none for the empty owner)."""
        ...

    async def take_unannounced(self, owner: str) -> list[StoredTask]:
        """The owner's tasks ended by a restart that it was not told of yet (then told)."""
        ...

    async def request_cancel(self, task_id: str) -> bool:
        """Ask the process running ``task_id`` to cancel it; False when nobody can be asked."""
        ...

    def on_cancel(self, handler: CancelHandler | None) -> None:
        """Set what runs when another process asks for a task of this one to be cancelled."""
        ...


class ApprovalStore(Protocol):
    """Pending approvals (2026-07-28 ``requestState`` nonces) and session grants.

    A nonce is minted for one session and one call and redeemed once, before it expires; a
    grant ("allow for this session") names a tool a session may call without asking again.

    Attributes:
        ttl_s: Seconds a nonce stays redeemable (``approvals.timeoutSec``; set by the gateway).
    """

    ttl_s: float

    async def issue(self, session_id: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """A new ``requestState`` payload for asking ``session_id`` to approve this call."""
        ...

    async def redeem(
        self, state: str | None, session_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> bool:
        """Whether ``state`` is a pending approval of this session and call (then spent)."""
        ...

    async def grant(self, session_id: str, tool: str) -> None:
        """Remember that the session allowed ``tool`` for the rest of the session."""
        ...

    async def granted(self, session_id: str) -> frozenset[str]:
        """The tools the session allowed for the rest of the session."""
        ...

    async def hold(self, held: HeldApproval) -> None:
        """Keep an approval that waits for the web console (:mod:`sagents.store._held`)."""
        ...

    async def release(self, approval_id: str) -> None:
        """Forget a held approval: its call went on (answered, or no answer in time)."""
        ...

    async def held(self) -> list[HeldApproval]:
        """Every held approval that has not expired, answered ones too, oldest first."""
        ...

    async def settle(self, approval_id: str, answer: str) -> bool:
        """Record the answer of a held approval that still waits (then it stays takeable for
        :attr:`ttl_s` seconds); False when it does not wait (answered already, expired or
        unknown): each is answered once, whichever process answers first."""
        ...

    async def take(self, binding: str, call: str) -> str | None:
        """The recorded answer of the oldest answered held approval of ``binding`` and ``call``
        (the :attr:`~sagents.store._held.HeldApproval.call` it was held with), which is then
        spent; None when there is none (or ``binding`` is "")."""
        ...

    def on_settled(self, handler: SettledHandler | None) -> None:
        """Set what runs when another gateway process (a replica) records the answer of a held
        approval (:meth:`settle`), with its id, so that a call waiting on that card here takes
        it at once. A store of one process never calls it (its answers are heard directly)."""
        ...


class PinStore(Protocol):
    """Pinned definitions of upstream tools (docs/gateway.md, "Pinned definitions"), per server
    and tool name: the accepted definition and a changed one the server offers since."""

    async def observe(self, server: str, definitions: Mapping[str, str]) -> dict[str, ToolPin]:
        """Record what ``server`` offers now (``{tool: definition}``) and return each tool's pin.

        A tool seen for the first time is pinned to its definition; one whose definition is
        the accepted one has no offered change (a change that was reverted is forgotten);
        any other definition becomes the tool's offered change (replacing an earlier one).
        """
        ...

    async def changes(self) -> list[ToolPin]:
        """Every tool whose server offers a definition other than the accepted one, by server
        and tool."""
        ...

    async def accept(
        self, server: str, tool: str | None = None, *, offered_digest: str | None = None
    ) -> list[ToolPin]:
        """Accept the offered change of ``tool`` of ``server`` (of every changed tool of the
        server when None): it becomes the pinned definition. With ``offered_digest``, only a
        change still offering that definition is accepted (the one an operator was shown, not
        one the server offered since). Returns the accepted pins (none when nothing was
        changed)."""
        ...


class AgentStore(Protocol):
    """The agent loop's paused runs and sessions (docs/agent.md, "Pausing and resuming"),
    shared by every worker that serves one agent.

    Documents are opaque text to the store (a signed ``RunState``, an ``AgentSession``'s
    JSON): the store keeps them, and makes the claim of a paused run atomic.
    """

    async def save_state(self, state_id: str, session_id: str, document: str) -> None:
        """Keep a paused run's document (replacing one of the same id)."""
        ...

    async def load_state(self, state_id: str) -> str | None:
        """A paused run's document, or None."""
        ...

    async def claim_state(self, state_id: str) -> bool:
        """Claim a paused run for one resume: True for exactly one caller, however many
        processes try at once; False for every later one."""
        ...

    async def save_session(self, session_id: str, document: str) -> None:
        """Keep a session's document (replacing the one before)."""
        ...

    async def load_session(self, session_id: str) -> str | None:
        """A session's document, or None."""
        ...

    async def last_session(self, prefix: str = "") -> str | None:
        """The id of the session saved last (among the ids that start with ``prefix``, taken
        literally), or None."""
        ...

    async def pending_state(self, session_id: str) -> str | None:
        """The id of the session's paused run saved last and not claimed yet, or None."""
        ...


class LoginStore(Protocol):
    """Upstream logins (docs/oauth.md): one sealed (encrypted) record per upstream server and
    principal. The store never sees a token in the clear."""

    async def load(self, server: str, principal: str) -> bytes | None:
        """The sealed record of ``principal``'s login to ``server``, or None."""
        ...

    async def save(self, server: str, principal: str, sealed: bytes) -> None:
        """Keep (or replace) the sealed record of ``principal``'s login to ``server``."""
        ...

    async def delete(self, server: str, principal: str) -> bool:
        """Forget ``principal``'s login to ``server``; whether there was one."""
        ...

    async def logins(self) -> list[SealedLogin]:
        """Every stored login, by server and principal."""
        ...

    async def reseal(self, reseal: Callable[[bytes], bytes]) -> int:
        """Replace every sealed record by ``reseal(record)``, all in one transaction (a
        ``reseal`` that raises changes nothing); how many there were."""
        ...

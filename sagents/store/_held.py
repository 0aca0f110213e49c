"""Approvals held for the web console (docs/console.md, "Approvals"): a call that waits for a
console answer is written to the store, so that a restart of the gateway shows its card again,
and an answer given after the restart is recorded once and released once.

The gateway writes one :class:`HeldApproval` when it asks (:meth:`ApprovalStore.hold`) and
removes it when the call it asked for goes on (:meth:`ApprovalStore.release`). A process that
starts finds the ones a gone process left (:meth:`ApprovalStore.held`); an answer to such a card
is recorded once (:meth:`ApprovalStore.settle`), and a client that can send the call again (a
2026-07-28 one, bound to its token and profile) takes that answer once (:meth:`ApprovalStore.
take`). :class:`MemoryHeld` is the in-memory form (one process: nothing outlives it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["HeldApproval", "MemoryHeld"]


@dataclass(frozen=True, kw_only=True)
class HeldApproval:
    """One approval waiting for the console, as kept in the store.

    Attributes:
        approval_id: The card's id (the console's form names it).
        binding: What may send the call again and take the answer: a 2026-07-28 client's
            token and profile, keyed (never the token itself); "" when nothing can (a
            handshake-era connection, which died with its process, or a run_script run,
            which is never resumed).
        call: A digest of the tool and its arguments, keyed like ``binding`` (never the
            arguments, nor a bare hash of them, which would confirm a guess of a redacted
            secret argument to whoever reads the row).
        card: The card as JSON text (what the console shows, with the secrets the gateway
            knows redacted: no more than the audit holds).
        asker: The gateway process that asked (``<replica id>/<boot id>``).
        asked_at: When it was asked, seconds since the epoch.
        expires_at: When it stops waiting (``approvals.timeoutSec`` after it was asked), or,
            once answered, stops being takeable.
        answer: The answer recorded after its asker was gone (``allow_once`` or ``deny``);
            None while it waits.
    """

    approval_id: str
    binding: str
    call: str
    card: str
    asker: str
    asked_at: float
    expires_at: float
    answer: str | None = None


class MemoryHeld:
    """Held approvals in memory (the embedded gateway without a data directory's store).

    Args:
        clock: Seconds since the epoch.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._held: dict[str, HeldApproval] = {}

    def _prune(self) -> None:
        now = self._clock()
        for approval_id in [k for k, v in self._held.items() if v.expires_at <= now]:
            del self._held[approval_id]

    def hold(self, held: HeldApproval) -> None:
        """See ``ApprovalStore.hold``."""
        self._prune()
        self._held[held.approval_id] = held

    def release(self, approval_id: str) -> None:
        """See ``ApprovalStore.release``."""
        self._held.pop(approval_id, None)

    def held(self) -> list[HeldApproval]:
        """See ``ApprovalStore.held``."""
        self._prune()
        return sorted(self._held.values(), key=lambda h: h.asked_at)

    def settle(self, approval_id: str, answer: str, ttl_s: float) -> bool:
        """See ``ApprovalStore.settle``."""
        self._prune()
        held = self._held.get(approval_id)
        if held is None or held.answer is not None:
            return False
        self._held[approval_id] = replace(held, answer=answer, expires_at=self._clock() + ttl_s)
        return True

    def take(self, binding: str, call: str) -> str | None:
        """See ``ApprovalStore.take``."""
        if not binding:
            return None
        self._prune()
        for held in self.held():
            if held.binding == binding and held.call == call and held.answer is not None:
                del self._held[held.approval_id]
                return held.answer
        return None

"""This gateway process among the gateway's earlier and later processes (restarts) and the
replicas of a shared store (docs/console.md, "Approvals"; docs/gateway.md, "Replicas").

Made once, before the parts that need it, so that each is built complete: the call decider
(an approval asked before a restart) and the console's pending approvals (a card a gone
process left) name the same process.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sagents.core._secrets import Redactor
from sagents.gateway._pending import HeldCards
from sagents.store._open import GatewayStore

__all__ = ["GatewayProcess"]


def _new_boot() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class GatewayProcess:
    """This process: its boot id (new at each start) over its store (None: no store).

    Attributes:
        store: The gateway's store (it tells whether a replica is alive); None: none.
        boot: Names this process among the earlier and later processes of the gateway.
    """

    store: GatewayStore | None = None
    boot: str = field(default_factory=_new_boot)

    @property
    def asker(self) -> str:
        """This process as a held approval names it: ``<replica id>/<boot id>``."""
        replica = self.store.replica_id if self.store is not None else ""
        return f"{replica}/{self.boot}"

    async def gone(self, asker: str) -> bool:
        """Whether the gateway process ``asker`` (``<replica id>/<boot id>``) that held a
        console approval is gone: an earlier process of this one, or a replica whose lease
        ran out."""
        replica, _, boot = asker.partition("/")
        if boot == self.boot:
            return False
        if self.store is None or replica == self.store.replica_id:
            return True
        return not await self.store.replica_alive(replica)

    def held_cards(self, redactor: Redactor | None = None) -> HeldCards | None:
        """Where the console's cards of this process are held (the store's approvals), the
        gateway's known secrets redacted from each; None without a store."""
        if self.store is None:
            return None
        return HeldCards(
            store=self.store.approvals,
            asker=self.asker,
            gone=self.gone,
            redact=redactor.redact_json if redactor is not None else None,
        )

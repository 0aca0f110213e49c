"""Approvals held for the web console on the PostgreSQL store (``sagents_held_approvals``,
migration 7; :mod:`sagents.store._held`): shared by the replicas, so that a card a gone replica
left is shown by another, and its answer is recorded and taken once, whichever replica acts.
Recording an answer sends ``NOTIFY sagents_approval`` with the card's id, in the same
statement: the replica whose call waits on that card hears it and takes the answer at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from sagents.store._held import HeldApproval
from sagents.store._postgres_db import Database

__all__ = ["APPROVAL_CHANNEL", "PostgresHeld"]

APPROVAL_CHANNEL: Final = "sagents_approval"
"""The ``LISTEN``/``NOTIFY`` channel of answers recorded for held approvals (payload: the id)."""

_COLUMNS: Final = "approval_id, binding, call, card, asker, asked_at, expires_at, answer"


class PostgresHeld:
    """The held approvals of :class:`~sagents.store._postgres_records.PostgresApprovals`.

    Args:
        database: The replicas' database.
        clock: Seconds since the epoch (the expiry is wall clock: it outlives the process).
    """

    def __init__(self, database: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = database
        self._clock = clock

    async def hold(self, held: HeldApproval) -> None:
        """See ``ApprovalStore.hold``."""
        async with self._db.connection() as db, db.transaction():
            await db.execute(
                "DELETE FROM sagents_held_approvals WHERE expires_at <= %s", (self._clock(),)
            )
            await db.execute(
                f"INSERT INTO sagents_held_approvals ({_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (approval_id) DO NOTHING",
                (
                    held.approval_id, held.binding, held.call, held.card, held.asker,
                    held.asked_at, held.expires_at, held.answer,
                ),
            )  # fmt: skip

    async def release(self, approval_id: str) -> None:
        """See ``ApprovalStore.release``."""
        async with self._db.connection() as db:
            await db.execute(
                "DELETE FROM sagents_held_approvals WHERE approval_id = %s", (approval_id,)
            )

    async def held(self) -> list[HeldApproval]:
        """See ``ApprovalStore.held``."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                f"SELECT {_COLUMNS} FROM sagents_held_approvals WHERE expires_at > %s "
                "ORDER BY asked_at",
                (self._clock(),),
            )
            return [_held(row) for row in await cursor.fetchall()]

    async def settle(self, approval_id: str, answer: str, ttl_s: float) -> bool:
        """See ``ApprovalStore.settle``: recorded once, by whichever replica answers first."""
        now = self._clock()
        async with self._db.connection() as db:  # one statement: told once it is recorded
            cursor = await db.execute(
                "WITH settled AS (UPDATE sagents_held_approvals SET answer = %s, expires_at = %s "
                "  WHERE approval_id = %s AND answer IS NULL AND expires_at > %s "
                "  RETURNING approval_id) "
                "SELECT pg_notify(%s, approval_id) FROM settled",
                (answer, now + ttl_s, approval_id, now, APPROVAL_CHANNEL),
            )
            return await cursor.fetchone() is not None

    async def take(self, binding: str, call: str) -> str | None:
        """See ``ApprovalStore.take``: spent once, by whichever replica takes it first."""
        if not binding:
            return None
        async with self._db.connection() as db:
            cursor = await db.execute(
                "DELETE FROM sagents_held_approvals WHERE approval_id = ("
                "  SELECT approval_id FROM sagents_held_approvals WHERE binding = %s AND "
                "  call = %s AND answer IS NOT NULL AND expires_at > %s ORDER BY asked_at "
                "  LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING answer",
                (binding, call, self._clock()),
            )
            row = await cursor.fetchone()
        return None if row is None else str(row[0])


def _held(row: tuple[Any, ...]) -> HeldApproval:
    approval_id, binding, call, card, asker, asked_at, expires_at, answer = row
    return HeldApproval(
        approval_id=approval_id, binding=binding, call=call, card=card, asker=asker,
        asked_at=float(asked_at), expires_at=float(expires_at), answer=answer,
    )  # fmt: skip

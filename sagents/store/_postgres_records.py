"""The smaller tables of the PostgreSQL store, shared by the gateway replicas
(docs/scale-out.md), each the PostgreSQL side of an interface of
:mod:`sagents.store._protocols` on the tables of :mod:`sagents.store._migrations`: pending
approvals and session grants, pinned tool definitions, upstream logins (sealed), and the agent
loop's stored runs and sessions. The replica's own state (its pool, heartbeats, leases, the
audit and the background tasks) is :mod:`sagents.store._postgres`.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from sagents.store._embedded import (
    MAX_PENDING_APPROVALS,
    REQUEST_STATE_TTL_S,
    approval_key,
    keyed_call_digest,
    nonce_of,
)
from sagents.store._held import HeldApproval
from sagents.store._logins import SealedLogin
from sagents.store._pins import ToolPin, definition_digest, pin_of
from sagents.store._postgres_db import STORE_SECRET, Database
from sagents.store._postgres_held import PostgresHeld
from sagents.store._protocols import SettledHandler

__all__ = ["PostgresAgents", "PostgresApprovals", "PostgresLogins", "PostgresPins"]


class PostgresApprovals:
    """Pending approvals and session grants shared by the replicas: an approval asked through
    one replica can be answered through another."""

    def __init__(self, database: Database, *, ttl_s: float = REQUEST_STATE_TTL_S) -> None:
        self._db = database
        self.ttl_s = ttl_s
        self._held = PostgresHeld(database)
        self._key: bytes | None = None
        self._on_settled: SettledHandler | None = None

    async def _call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """The pending approval's digest of the call, keyed with the replicas' approval key
        (the table never holds a bare hash of the arguments, migration 8)."""
        if self._key is None:
            self._key = approval_key(await self._db.secret(STORE_SECRET))
        return keyed_call_digest(self._key, tool, arguments)

    async def issue(self, session_id: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """A new state for asking ``session_id`` to approve this call (at most
        ``MAX_PENDING_APPROVALS`` kept per session: the oldest is dropped)."""
        nonce, call = secrets.token_urlsafe(18), await self._call(tool, arguments)
        async with self._db.connection() as db, db.transaction():
            await db.execute("DELETE FROM sagents_pending_approvals WHERE expires_at <= now()")
            await db.execute(
                "INSERT INTO sagents_pending_approvals (nonce, session_id, call, expires_at) "
                "VALUES (%s, %s, %s, now() + make_interval(secs => %s))",
                (nonce, session_id, call, self.ttl_s),
            )
            await db.execute(
                "DELETE FROM sagents_pending_approvals WHERE nonce IN ("
                "  SELECT nonce FROM sagents_pending_approvals WHERE session_id = %s"
                "  ORDER BY expires_at DESC OFFSET %s)",
                (session_id, MAX_PENDING_APPROVALS),
            )
        return json.dumps({"nonce": nonce})

    async def redeem(
        self, state: str | None, session_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> bool:
        """Whether ``state`` is a pending approval of this session and call (then spent, by
        whichever replica redeems it first)."""
        nonce = nonce_of(state)
        if nonce is None:
            return False
        call = await self._call(tool, arguments)
        async with self._db.connection() as db:
            cursor = await db.execute(
                "DELETE FROM sagents_pending_approvals WHERE nonce = %s AND session_id = %s "
                "AND call = %s AND expires_at > now() RETURNING nonce",
                (nonce, session_id, call),
            )
            return await cursor.fetchone() is not None

    async def grant(self, session_id: str, tool: str) -> None:
        """Remember the grant."""
        async with self._db.connection() as db:
            await db.execute(
                "INSERT INTO sagents_grants (session_id, tool) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                (session_id, tool),
            )

    async def granted(self, session_id: str) -> frozenset[str]:
        """The session's grants."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "SELECT tool FROM sagents_grants WHERE session_id = %s", (session_id,)
            )
            return frozenset(row[0] for row in await cursor.fetchall())

    async def hold(self, held: HeldApproval) -> None:
        """See ``ApprovalStore.hold`` (:mod:`sagents.store._postgres_held`)."""
        await self._held.hold(held)

    async def release(self, approval_id: str) -> None:
        """See ``ApprovalStore.release``."""
        await self._held.release(approval_id)

    async def held(self) -> list[HeldApproval]:
        """See ``ApprovalStore.held``."""
        return await self._held.held()

    async def settle(self, approval_id: str, answer: str) -> bool:
        """See ``ApprovalStore.settle``."""
        return await self._held.settle(approval_id, answer, self.ttl_s)

    async def take(self, binding: str, call: str) -> str | None:
        """See ``ApprovalStore.take``."""
        return await self._held.take(binding, call)

    def on_settled(self, handler: SettledHandler | None) -> None:
        """See ``ApprovalStore.on_settled``."""
        self._on_settled = handler

    async def settled_elsewhere(self, approval_id: str) -> None:
        """An answer was recorded (heard by :meth:`PostgresStore._listen`, from any replica,
        this one too)."""
        if self._on_settled is not None:
            await self._on_settled(approval_id)


_PIN_COLUMNS = "server, tool, definition, digest, offered, offered_digest"


class PostgresPins:
    """Pinned tool definitions in ``sagents_tool_pins``, shared by the replicas: a change one
    replica saw is shown, and accepted, through any of them."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def observe(self, server: str, definitions: Mapping[str, str]) -> dict[str, ToolPin]:
        """See :meth:`sagents.store._protocols.PinStore.observe` (one transaction)."""
        pins: dict[str, ToolPin] = {}
        now = time.time()
        async with self._db.connection() as db, db.transaction():
            for tool, definition in definitions.items():
                digest = definition_digest(definition)
                await db.execute(
                    "INSERT INTO sagents_tool_pins (server, tool, definition, digest, updated) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (server, tool) DO NOTHING",
                    (server, tool, definition, digest, now),
                )
                cursor = await db.execute(
                    "UPDATE sagents_tool_pins SET "
                    "offered = CASE WHEN digest = %s THEN NULL ELSE %s END, "
                    "offered_digest = CASE WHEN digest = %s THEN NULL ELSE %s END, updated = %s "
                    f"WHERE server = %s AND tool = %s RETURNING {_PIN_COLUMNS}",
                    (digest, definition, digest, digest, now, server, tool),
                )
                row = await cursor.fetchone()
                assert row is not None  # inserted above if it was missing
                pins[tool] = pin_of(row)
        return pins

    async def changes(self) -> list[ToolPin]:
        """See :meth:`sagents.store._protocols.PinStore.changes`."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                f"SELECT {_PIN_COLUMNS} FROM sagents_tool_pins WHERE offered IS NOT NULL "
                "ORDER BY server, tool"
            )
            return [pin_of(row) for row in await cursor.fetchall()]

    async def accept(
        self, server: str, tool: str | None = None, *, offered_digest: str | None = None
    ) -> list[ToolPin]:
        """See :meth:`sagents.store._protocols.PinStore.accept`."""
        where, params = "server = %s AND offered IS NOT NULL", [server]
        if tool is not None:
            where += " AND tool = %s"
            params.append(tool)
        if offered_digest is not None:
            where += " AND offered_digest = %s"
            params.append(offered_digest)
        async with self._db.connection() as db:
            cursor = await db.execute(
                "UPDATE sagents_tool_pins SET definition = offered, digest = offered_digest, "
                f"offered = NULL, offered_digest = NULL, updated = %s WHERE {where} "
                f"RETURNING {_PIN_COLUMNS}",
                (time.time(), *params),
            )
            rows = await cursor.fetchall()
        return sorted((pin_of(row) for row in rows), key=lambda pin: pin.tool)


class PostgresLogins:
    """Upstream logins (a :class:`~sagents.store._protocols.LoginStore`) in
    ``sagents_upstream_logins``, shared by the replicas (each seals with the same key)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def load(self, server: str, principal: str) -> bytes | None:
        """See :meth:`sagents.store._protocols.LoginStore.load`."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "SELECT sealed FROM sagents_upstream_logins WHERE server = %s AND principal = %s",
                (server, principal),
            )
            row = await cursor.fetchone()
        return None if row is None else bytes(row[0])

    async def save(self, server: str, principal: str, sealed: bytes) -> None:
        """See :meth:`sagents.store._protocols.LoginStore.save`."""
        async with self._db.connection() as db:
            await db.execute(
                "INSERT INTO sagents_upstream_logins (server, principal, sealed, updated) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (server, principal) DO UPDATE SET "
                "sealed = excluded.sealed, updated = excluded.updated",
                (server, principal, sealed, time.time()),
            )

    async def delete(self, server: str, principal: str) -> bool:
        """See :meth:`sagents.store._protocols.LoginStore.delete`."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "DELETE FROM sagents_upstream_logins WHERE server = %s AND principal = %s",
                (server, principal),
            )
            return bool(cursor.rowcount)

    async def logins(self) -> list[SealedLogin]:
        """See :meth:`sagents.store._protocols.LoginStore.logins`."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "SELECT server, principal, sealed, updated FROM sagents_upstream_logins "
                "ORDER BY server, principal"
            )
            rows = await cursor.fetchall()
        return [SealedLogin(row[0], row[1], bytes(row[2]), row[3]) for row in rows]

    async def reseal(self, reseal: Callable[[bytes], bytes]) -> int:
        """See :meth:`sagents.store._protocols.LoginStore.reseal` (one transaction, rows
        locked)."""
        async with self._db.connection() as db, db.transaction():
            cursor = await db.execute(
                "SELECT server, principal, sealed FROM sagents_upstream_logins FOR UPDATE"
            )
            rows = await cursor.fetchall()
            for server, principal, sealed in rows:
                await db.execute(
                    "UPDATE sagents_upstream_logins SET sealed = %s "
                    "WHERE server = %s AND principal = %s",
                    (reseal(bytes(sealed)), server, principal),
                )
        return len(rows)


class PostgresAgents:
    """Paused runs and agent sessions (an :class:`~sagents.store._protocols.AgentStore`) in
    ``sagents_run_states``, ``sagents_run_claims`` and ``sagents_agent_sessions``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def save_state(self, state_id: str, session_id: str, document: str) -> None:
        """See ``AgentStore.save_state``."""
        async with self._db.connection() as db:
            await db.execute(
                "INSERT INTO sagents_run_states (state_id, session_id, document, saved) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (state_id) DO UPDATE SET "
                "document = EXCLUDED.document, saved = EXCLUDED.saved",
                (state_id, session_id, document, time.time()),
            )

    async def load_state(self, state_id: str) -> str | None:
        """See ``AgentStore.load_state``."""
        return await self._one(
            "SELECT document FROM sagents_run_states WHERE state_id = %s", (state_id,)
        )

    async def claim_state(self, state_id: str) -> bool:
        """See ``AgentStore.claim_state``: the row's primary key makes it once."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "INSERT INTO sagents_run_claims (state_id, claimed) VALUES (%s, %s) "
                "ON CONFLICT (state_id) DO NOTHING",
                (state_id, time.time()),
            )
            return cursor.rowcount == 1

    async def save_session(self, session_id: str, document: str) -> None:
        """See ``AgentStore.save_session``."""
        async with self._db.connection() as db:
            await db.execute(
                "INSERT INTO sagents_agent_sessions (session_id, document, saved) "
                "VALUES (%s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
                "document = EXCLUDED.document, saved = EXCLUDED.saved",
                (session_id, document, time.time()),
            )

    async def load_session(self, session_id: str) -> str | None:
        """See ``AgentStore.load_session``."""
        return await self._one(
            "SELECT document FROM sagents_agent_sessions WHERE session_id = %s", (session_id,)
        )

    async def last_session(self, prefix: str = "") -> str | None:
        """See ``AgentStore.last_session``."""
        return await self._one(
            "SELECT session_id FROM sagents_agent_sessions WHERE "
            "substr(session_id, 1, length(%s)) = %s ORDER BY saved DESC LIMIT 1",
            (prefix, prefix),
        )

    async def pending_state(self, session_id: str) -> str | None:
        """See ``AgentStore.pending_state``."""
        return await self._one(
            "SELECT s.state_id FROM sagents_run_states s WHERE s.session_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM sagents_run_claims c WHERE c.state_id = s.state_id) "
            "ORDER BY s.saved DESC LIMIT 1",
            (session_id,),
        )

    async def _one(self, query: str, params: tuple[Any, ...]) -> str | None:
        async with self._db.connection() as db:
            cursor = await db.execute(query, params)
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

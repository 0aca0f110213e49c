"""The shared store of gateway replicas, on PostgreSQL (psycopg 3, async, with a pool).

One :class:`PostgresStore` per gateway process (a *replica*), all on one database
(docs/scale-out.md):

- :attr:`~PostgresStore.audit`, :attr:`~PostgresStore.tasks` (here), the smaller tables
  (:mod:`sagents.store._postgres_records`) and the built-in tools' state
  (:mod:`sagents.store._postgres_state`): the interfaces of :mod:`sagents.store._protocols`, on
  the tables of :mod:`sagents.store._migrations` (applied on entering), all through one
  :class:`~sagents.store._postgres_db.Database`;
- heartbeats with leases: each replica renews its row in ``sagents_replicas`` every third of its
  lease; on each beat it also marks ``failed`` the running background tasks of replicas whose
  lease ran out (a replica killed by SIGKILL, a machine gone), so another replica notices a
  dead one within one lease and a beat;
- cancellation across replicas: ``script_cancel`` on replica B of a task that replica A runs
  sends ``NOTIFY sagents_cancel`` with the task id; A ``LISTEN``\\s on a connection of its own
  and cancels the task (its end is written to the store as usual);
- answers across replicas: an answer recorded for a held console approval sends ``NOTIFY
  sagents_approval`` (:mod:`sagents.store._postgres_held`); the same listener hears it, and the
  replica whose call waits on that card takes the answer;
- secrets shared by the replicas (the ``requestState`` sealing key, the key that derives the
  session ids of 2026-07-28 clients), created by the first replica that needs them.

An outage of the database is a state, not a crash (docs/scale-out.md, "When the database is
down"): every call raises :class:`~sagents.errors.StoreError` (``StoreUnavailableError`` while
the database is out of reach), never a driver error; the pool checks each connection before
handing it out and reconnects with backoff; the heartbeats and the listener go on and
reconnect; :meth:`PostgresAudit.ensure_reachable` lets a run that needs the store be refused
before it starts while the store is known to be down. A replica whose lease another replica
took (its background calls marked ``failed`` by a sweep) stops those calls: their status stays
what the sweep wrote (a terminal status is written once).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Self

import anyio
import anyio.abc
import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from sagents.audit._store import AuditEntry, AuditKind
from sagents.audit._tasks import RESULT_CHARS, StoredTask
from sagents.errors import StoreError, StoreSchemaError, StoreUnavailableError
from sagents.store._builtin_state import MemoryBackend, TodoBackend
from sagents.store._location import StoreLocation
from sagents.store._migrations import MIGRATIONS, SCHEMA_VERSION
from sagents.store._postgres_db import STORE_SECRET, Database, insert_audit
from sagents.store._postgres_held import APPROVAL_CHANNEL
from sagents.store._postgres_records import (
    PostgresAgents,
    PostgresApprovals,
    PostgresLogins,
    PostgresPins,
)
from sagents.store._postgres_state import PostgresMemory, PostgresTodos
from sagents.store._protocols import CancelHandler

__all__ = [
    "CANCEL_CHANNEL",
    "LEASE_REASON",
    "PostgresAudit",
    "PostgresStore",
    "PostgresTasks",
]

logger = logging.getLogger(__name__)

CANCEL_CHANNEL = "sagents_cancel"
"""The ``LISTEN``/``NOTIFY`` channel of cancel requests (payload: a task id)."""
LEASE_REASON = "gateway replica stopped (no heartbeat within its lease)"
"""The ``reason`` of a background task whose replica died."""
CONNECT_TIMEOUT_S = 10.0  # seconds to reach the database before a clear error
POOL_MAX = 10  # connections per replica
# Seconds one reconnection of the pool backs off for (1, 2, 4 s...) before it gives up; the
# next call then starts a new one at once. Short, so that a restarted database is used again
# within seconds, not after a backoff grown during a long outage.
RECONNECT_TIMEOUT_S = 5.0
LISTEN_BACKOFF_S = (0.5, 10.0)  # first and longest wait between reconnections of the listener
_TASK_COLUMNS = "task_id, owner, tool, status, started_at, finished_at, result, is_error, reason"


def _task(row: TupleRow) -> StoredTask:
    task_id, owner, tool, status, started, finished, result, is_error, reason = row
    return StoredTask(
        task_id=task_id,
        owner=owner,
        tool=tool,
        status=status,
        started_at=float(started),
        finished_at=float(finished) if finished is not None else None,
        result=result,
        is_error=is_error,
        reason=reason,
    )


class PostgresAudit:
    """Audit rows in ``sagents_audit`` (the :class:`~sagents.store._protocols.AuditLog`)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def ensure_reachable(self) -> None:
        """Refuse (``StoreUnavailableError``) while the database is known to be out of reach:
        a run that needs its audit row is refused before it starts."""
        await self._db.ensure_reachable()

    async def record(self, entry: AuditEntry) -> None:
        """Insert one entry."""
        async with self._db.connection() as db:
            await insert_audit(db, entry)

    async def entries(self, *, kind: AuditKind | None = None, limit: int = 100) -> list[AuditEntry]:
        """The latest entries first, optionally of one kind."""
        query = "SELECT ts, kind, session_id, tool, status, data FROM sagents_audit"
        params: tuple[Any, ...] = ()
        if kind is not None:
            query += " WHERE kind = %s"
            params = (kind,)
        async with self._db.connection() as db:
            cursor = await db.execute(query + " ORDER BY id DESC LIMIT %s", (*params, limit))
            rows = await cursor.fetchall()
        return [
            AuditEntry(ts=ts, kind=k, session_id=sid, tool=tool, status=status, data=data)
            for ts, k, sid, tool, status, data in rows
        ]


class PostgresTasks:
    """Background tasks in ``sagents_tasks``, each tagged with the replica running it."""

    shared = True

    def __init__(self, database: Database, replica_id: str) -> None:
        self._db = database
        self.replica_id = replica_id
        self._on_cancel: CancelHandler | None = None
        self._running: set[str] = set()  # started here, not yet finished

    async def started(self, task_id: str, *, owner: str, tool: str, started_at: float) -> None:
        """Record a task this replica handed off to the background."""
        async with self._db.connection() as db:
            await db.execute(
                "INSERT INTO sagents_tasks (task_id, owner, tool, status, started_at, replica_id) "
                "VALUES (%s, %s, %s, 'running', %s, %s) ON CONFLICT (task_id) DO UPDATE SET "
                "owner = EXCLUDED.owner, tool = EXCLUDED.tool, status = 'running', "
                "started_at = EXCLUDED.started_at, replica_id = EXCLUDED.replica_id",
                (task_id, owner, tool, started_at, self.replica_id),
            )
        self._running.add(task_id)

    async def finished(
        self, task_id: str, *, status: str, result: str, is_error: bool, reason: str | None = None
    ) -> bool:
        """Record how a task ended (its result text, cut to ``RESULT_CHARS``; ``reason`` when
        the gateway, not a client, ended it).

        Returns:
            Whether it was written: False when the task had already ended (a sweep marked it
            ``failed`` while this replica was slow), whose status then stays.
        """
        async with self._db.connection() as db:
            cursor = await db.execute(
                "UPDATE sagents_tasks SET status = %s, finished_at = %s, result = %s, "
                "is_error = %s, reason = %s, announced = TRUE "
                "WHERE task_id = %s AND status = 'running'",
                (status, time.time(), result[:RESULT_CHARS], is_error, reason, task_id),
            )
            written = cursor.rowcount == 1
        self._running.discard(task_id)
        return written

    async def taken(self) -> list[str]:
        """The tasks this replica runs that the store shows ended already (a sweep took them
        when this replica's lease ran out): they are to be stopped."""
        if not self._running:
            return []
        async with self._db.connection() as db:
            cursor = await db.execute(
                "SELECT task_id FROM sagents_tasks WHERE task_id = ANY(%s) AND status <> 'running'",
                (sorted(self._running),),
            )
            return [row[0] for row in await cursor.fetchall()]

    async def mark_interrupted(self, reason: str) -> list[StoredTask]:
        """Mark ``failed`` the running tasks of replicas whose lease ran out (or whose row is
        gone); returns them, as marked."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "UPDATE sagents_tasks AS t SET status = 'failed', is_error = TRUE, reason = %s, "
                "finished_at = extract(epoch FROM now()) "
                "WHERE t.status = 'running' AND t.replica_id <> %s AND NOT EXISTS ("
                "  SELECT 1 FROM sagents_replicas AS r WHERE r.replica_id = t.replica_id"
                "  AND r.heartbeat_at >= now() - make_interval(secs => r.lease_s)) "
                f"RETURNING {_TASK_COLUMNS}",
                (reason, self.replica_id),
            )
            return [_task(row) for row in await cursor.fetchall()]

    async def get(self, task_id: str) -> StoredTask | None:
        """One task, or None."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                f"SELECT {_TASK_COLUMNS} FROM sagents_tasks WHERE task_id = %s", (task_id,)
            )
            row = await cursor.fetchone()
        return _task(row) if row is not None else None

    async def owned(self, owner: str) -> list[StoredTask]:
        """The tasks of ``owner``, oldest first (none for the empty owner)."""
        if not owner:
            return []
        async with self._db.connection() as db:
            cursor = await db.execute(
                f"SELECT {_TASK_COLUMNS} FROM sagents_tasks WHERE owner = %s ORDER BY started_at",
                (owner,),
            )
            return [_task(row) for row in await cursor.fetchall()]

    async def take_unannounced(self, owner: str) -> list[StoredTask]:
        """The owner's tasks a dead process left, not announced yet (then announced, once:
        the update and the read are one statement, so two replicas never both announce)."""
        if not owner:
            return []
        async with self._db.connection() as db:
            cursor = await db.execute(
                "UPDATE sagents_tasks SET announced = TRUE WHERE owner = %s "
                f"AND status = 'failed' AND NOT announced RETURNING {_TASK_COLUMNS}",
                (owner,),
            )
            rows = await cursor.fetchall()
        return sorted((_task(row) for row in rows), key=lambda task: task.started_at)

    async def request_cancel(self, task_id: str) -> bool:
        """``NOTIFY`` the replicas; the one running ``task_id`` cancels it."""
        async with self._db.connection() as db:
            await db.execute("SELECT pg_notify(%s, %s)", (CANCEL_CHANNEL, task_id))
        return True

    def on_cancel(self, handler: CancelHandler | None) -> None:
        """Set what runs for each cancel request this replica receives."""
        self._on_cancel = handler

    async def cancel_requested(self, task_id: str) -> None:
        """A cancel request arrived (from :meth:`PostgresStore._listen`)."""
        if self._on_cancel is not None:
            await self._on_cancel(task_id)


class PostgresStore:
    """The state of one replica on a shared PostgreSQL database; an async context manager.

    Args:
        location: A ``postgresql://`` location (:func:`sagents.store._location.parse_store_url`).
        replica_id: This replica's name in ``sagents_replicas`` (random when None).

    Raises:
        StoreUnavailableError: on entering, the database cannot be reached or refuses the
            credentials.
        StoreSchemaError: on entering, the database's schema is newer than this sagents.
    """

    shared = True

    def __init__(self, location: StoreLocation, *, replica_id: str | None = None) -> None:
        self.location = location
        self.replica_id = (
            replica_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        )
        self.lease_s = location.lease_s
        self.secret: bytes | None = None
        self._pool = AsyncConnectionPool(
            location.url,
            min_size=1,
            max_size=POOL_MAX,
            open=False,
            timeout=CONNECT_TIMEOUT_S,
            kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT_S)},
            # a connection is checked before it is handed out: after a restart of the
            # database (even a fast one of an idle pool) a stale one is replaced, not used
            check=AsyncConnectionPool.check_connection,
            reconnect_timeout=RECONNECT_TIMEOUT_S,
        )
        self._db = Database(self._pool, location.url, location.shown)
        self.audit = PostgresAudit(self._db)
        self.tasks = PostgresTasks(self._db, self.replica_id)
        self.approvals = PostgresApprovals(self._db)
        self.pins = PostgresPins(self._db)
        self.agents = PostgresAgents(self._db)
        self.logins = PostgresLogins(self._db)
        self.memory: MemoryBackend | None = PostgresMemory(self._db)
        self.todos: TodoBackend | None = PostgresTodos(self._db)
        self._tg: anyio.abc.TaskGroup | None = None
        self._stack = AsyncExitStack()  # what __aenter__ opened (its _lifespan)
        self._listening = anyio.Event()

    @property
    def pool(self) -> AsyncConnectionPool:
        """The replica's connection pool."""
        return self._pool

    @property
    def database(self) -> Database:
        """The replica's pool with what it knows of the database's health: the built-in
        tools' PostgreSQL backends use it, so that their failures are store errors too."""
        return self._db

    async def __aenter__(self) -> Self:
        # The store sits below sagents.core (docs/architecture.md, "Layers"), so its lifetime
        # is entered on a stack here rather than through core's Lifespan base: the contextlib
        # recipe for an __aenter__ that opens several things (its pop_all keeps them open).
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._lifespan())
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, AsyncExitStack()
        await stack.aclose()

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        """Bring the schema up to date, open the pool, register the replica and run its
        heartbeat and listener; on leaving, stop them, remove the replica's row (bounded) and
        close the pool (shielded)."""
        await self._prepare()
        try:
            await self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as error:
            raise self._unavailable(str(error)) from error
        try:
            self.secret = await self._db.secret(STORE_SECRET)
            await self._beat()
            async with anyio.create_task_group() as tg:
                self._tg = tg
                try:
                    tg.start_soon(self._heartbeats)
                    await tg.start(self._listen)
                    yield
                finally:
                    self._tg = None
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._leave()

    async def _leave(self) -> None:
        """Remove this replica's row (bounded; a failure is logged), then close the pool."""
        try:
            with anyio.move_on_after(CONNECT_TIMEOUT_S):
                async with self._db.connection() as db:
                    await db.execute(
                        "DELETE FROM sagents_replicas WHERE replica_id = %s", (self.replica_id,)
                    )
        except StoreError as error:
            logger.info("could not remove replica %s: %s", self.replica_id, error)
        finally:
            await self._pool.close()

    def _unavailable(self, reason: str) -> StoreUnavailableError:
        return self._db.unavailable(reason)

    async def _prepare(self) -> None:
        """Reach the database once (for a clear error) and bring its schema up to date.

        Raises:
            StoreUnavailableError, StoreSchemaError: see the class.
            StoreError: the database refused the migration.
        """
        try:
            await self._migrate()
        except psycopg.OperationalError as error:
            raise self._unavailable(str(error)) from error
        except psycopg.Error as error:
            raise StoreError(
                f"cannot bring the schema of {self.location.shown} up to date: "
                f"{' '.join(str(error).split())}",
                details={"store": self.location.shown},
            ) from error

    async def _migrate(self) -> None:
        connection = await psycopg.AsyncConnection.connect(
            self.location.url, connect_timeout=int(CONNECT_TIMEOUT_S)
        )
        async with connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext('sagents_schema'))")
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS sagents_schema (version INTEGER NOT NULL)"
            )
            cursor = await connection.execute("SELECT version FROM sagents_schema")
            row = await cursor.fetchone()
            version = row[0] if row is not None else 0
            if version > SCHEMA_VERSION:
                raise StoreSchemaError(
                    f"the store {self.location.shown} has schema version {version}; this "
                    f"sagents knows versions up to {SCHEMA_VERSION}",
                    hint="upgrade sagents on this machine to the release the other replicas run",
                    details={
                        "store": self.location.shown,
                        "found": version,
                        "expected": SCHEMA_VERSION,
                    },
                )
            for number in range(version + 1, SCHEMA_VERSION + 1):
                await connection.execute(MIGRATIONS[number - 1])
            if row is None:
                await connection.execute(
                    "INSERT INTO sagents_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
                )
            elif version != SCHEMA_VERSION:
                await connection.execute(
                    "UPDATE sagents_schema SET version = %s", (SCHEMA_VERSION,)
                )

    async def _beat(self) -> None:
        async with self._db.connection() as db:
            await db.execute(
                "INSERT INTO sagents_replicas (replica_id, host, lease_s) VALUES (%s, %s, %s) "
                "ON CONFLICT (replica_id) DO UPDATE SET heartbeat_at = now(), "
                "lease_s = EXCLUDED.lease_s",
                (self.replica_id, socket.gethostname(), self.lease_s),
            )

    async def replica_alive(self, replica_id: str) -> bool:
        """Whether ``replica_id`` renewed its lease in time (``GatewayStore.replica_alive``)."""
        async with self._db.connection() as db:
            cursor = await db.execute(
                "SELECT 1 FROM sagents_replicas WHERE replica_id = %s "
                "AND heartbeat_at >= now() - make_interval(secs => lease_s)",
                (replica_id,),
            )
            return await cursor.fetchone() is not None

    async def sweep(self) -> list[StoredTask]:
        """Mark the running tasks of dead replicas ``failed`` and forget those replicas."""
        failed = await self.tasks.mark_interrupted(LEASE_REASON)
        async with self._db.connection() as db:
            await db.execute(
                "DELETE FROM sagents_replicas WHERE replica_id <> %s "
                "AND heartbeat_at < now() - make_interval(secs => lease_s)",
                (self.replica_id,),
            )
        if failed:
            logger.warning(
                "background calls of a stopped replica, now failed: %s",
                ", ".join(task.task_id for task in failed),
            )
        return failed

    async def _heartbeats(self) -> None:
        """Beat, sweep and stop the calls whose lease was taken, every third of the lease; a
        database out of reach is logged (by the pool wrapper) and tried again next time."""
        while True:
            try:
                await self._beat()
                await self.sweep()
                await self._stop_taken()
            except StoreError as error:
                logger.debug("store heartbeat failed (replica %s): %s", self.replica_id, error)
            await anyio.sleep(self.lease_s / 3)

    async def _stop_taken(self) -> None:
        """Stop the calls of this replica that a sweep marked ``failed`` (this replica was slow,
        not dead): each ends as the sweep said (its end is not written again)."""
        for task_id in await self.tasks.taken():
            logger.warning(
                "background call %s was failed by another replica (this replica's lease ran "
                "out): stopping it",
                task_id,
            )
            assert self._tg is not None  # this runs in it
            self._tg.start_soon(self.tasks.cancel_requested, task_id)

    async def _listen(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Receive cancel requests and recorded answers on a connection of its own
        (reconnecting with backoff when it drops: the database restarted; what was sent
        meanwhile is not heard: the console's next refresh finds a recorded answer)."""
        started = False
        delay = LISTEN_BACKOFF_S[0]
        while True:
            try:
                connection = await psycopg.AsyncConnection.connect(
                    self.location.url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S)
                )
                async with connection:
                    await connection.execute(f"LISTEN {CANCEL_CHANNEL}")
                    await connection.execute(f"LISTEN {APPROVAL_CHANNEL}")
                    if not started:
                        started = True
                        task_status.started()
                    else:
                        logger.warning("store listener reconnected")
                    delay = LISTEN_BACKOFF_S[0]
                    async for notify in connection.notifies():
                        assert self._tg is not None  # this task runs in it
                        # each waits (a cancel for its task to end): not in the listener's way
                        if notify.channel == APPROVAL_CHANNEL:
                            self._tg.start_soon(self.approvals.settled_elsewhere, notify.payload)
                        else:
                            self._tg.start_soon(self.tasks.cancel_requested, notify.payload)
            except (psycopg.Error, OSError) as error:
                if not started:
                    raise self._unavailable(str(error)) from error
                logger.warning(
                    "store listener lost its connection (next try in %g s): %s", delay, error
                )
                await anyio.sleep(delay)
                delay = min(delay * 2, LISTEN_BACKOFF_S[1])

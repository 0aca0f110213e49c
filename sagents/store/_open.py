"""Opening the store a location names."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from sagents.errors import ConfigError
from sagents.store._builtin_state import MemoryBackend, TodoBackend
from sagents.store._embedded import EmbeddedStore
from sagents.store._location import StoreLocation
from sagents.store._protocols import (
    AgentStore,
    ApprovalStore,
    AuditLog,
    LoginStore,
    PinStore,
    TaskStore,
)

__all__ = ["GatewayStore", "open_store"]


class GatewayStore(Protocol):
    """Every kind of a gateway's state, in one place (entered with ``async with``).

    Attributes:
        shared: Whether other processes (replicas) use it at the same time.
        replica_id: This process's name among the replicas.
        secret: 32 bytes shared by the replicas, or kept by the embedded store across
            restarts (``gateway.key``); None before the store is entered.
        memory: Where the built-in memory tools keep memories (their audit rows go to
            ``audit`` with them), or None: in their own SQLite file.
        todos: Where the built-in todo tools keep task lists, or None: in their own SQLite
            file.
    """

    shared: bool
    replica_id: str
    secret: bytes | None
    memory: MemoryBackend | None
    todos: TodoBackend | None

    @property
    def audit(self) -> AuditLog: ...
    @property
    def tasks(self) -> TaskStore: ...
    @property
    def approvals(self) -> ApprovalStore: ...
    @property
    def pins(self) -> PinStore: ...
    @property
    def agents(self) -> AgentStore: ...
    @property
    def logins(self) -> LoginStore: ...
    async def replica_alive(self, replica_id: str) -> bool:
        """Whether the replica ``replica_id`` still holds its lease (the embedded store: this
        process's name only)."""
        ...


def open_store(
    location: StoreLocation, *, data_dir: Path
) -> AbstractAsyncContextManager[GatewayStore]:
    """The store at ``location``, to enter with ``async with``.

    Args:
        location: Where (:func:`sagents.store._location.parse_store_url`).
        data_dir: The folder of the embedded SQLite files when ``location`` names none.

    Raises:
        ConfigError: a PostgreSQL store without the driver installed.
    """
    if location.kind == "sqlite":
        return EmbeddedStore(directory=location.directory or data_dir)
    try:
        from sagents.store._postgres import PostgresStore
    except ImportError as error:
        raise ConfigError(
            f"the store {location.shown} needs the PostgreSQL driver ({error})",
            key="--store",
            hint="install it with: pip install 'sagents[postgresql]'",
        ) from error
    return PostgresStore(location)

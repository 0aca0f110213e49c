"""sagents.store: where a gateway keeps its state — audit rows, background tasks, pending and
granted approvals, pinned tool definitions, agent runs, the built-in memory and todo tools'
state — embedded (SQLite, one process) or shared by
replicas (PostgreSQL).

Floor 0 of ``docs/architecture.md`` ("Layers"): it imports only ``sagents.errors`` and
``sagents.audit``; the PostgreSQL driver is imported only when a ``postgresql://`` store is
opened. docs/scale-out.md says what each guarantee becomes with replicas.
"""

from sagents.store._agents import SqliteAgentStore
from sagents.store._embedded import EmbeddedStore, MemoryApprovals, SqliteTasks
from sagents.store._location import DEFAULT_LEASE_S, StoreLocation, parse_store_url, redact_url
from sagents.store._open import GatewayStore, open_store
from sagents.store._pins import ToolPin
from sagents.store._protocols import (
    AgentStore,
    ApprovalStore,
    AuditLog,
    CancelHandler,
    PinStore,
    TaskStore,
)

__all__ = [
    "DEFAULT_LEASE_S",
    "AgentStore",
    "ApprovalStore",
    "AuditLog",
    "CancelHandler",
    "EmbeddedStore",
    "GatewayStore",
    "MemoryApprovals",
    "PinStore",
    "SqliteAgentStore",
    "SqliteTasks",
    "StoreLocation",
    "TaskStore",
    "ToolPin",
    "open_store",
    "parse_store_url",
    "redact_url",
]

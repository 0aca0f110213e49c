"""sagents.audit: the audit store and the background-task store (SQLite, under the data
directory).

Floor 0 of ``docs/architecture.md`` ("Layers"): it imports only ``sagents.errors``.
"""

from sagents.audit._store import (
    AuditEntry,
    AuditKind,
    AuditStore,
    SqliteAuditStore,
    default_audit_path,
    default_data_dir,
)
from sagents.audit._tasks import SqliteTaskStore, StoredTask

__all__ = [
    "AuditEntry",
    "AuditKind",
    "AuditStore",
    "SqliteAuditStore",
    "SqliteTaskStore",
    "StoredTask",
    "default_audit_path",
    "default_data_dir",
]

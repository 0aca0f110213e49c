"""sagents.audit: the audit store (SQLite, embedded default under the data directory)."""

from sagents.audit.store import (
    AuditEntry,
    AuditKind,
    AuditStore,
    SqliteAuditStore,
    default_audit_path,
    default_data_dir,
)

__all__ = [
    "AuditEntry",
    "AuditKind",
    "AuditStore",
    "SqliteAuditStore",
    "default_audit_path",
    "default_data_dir",
]

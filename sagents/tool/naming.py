"""STAND-IN for the ``toolschema`` branch: exported tool names (``^[a-zA-Z0-9_-]{1,64}$``).

Minimal version so that the tool manager can be built and tested before that branch is merged;
the lead replaces this file with the real one (``git checkout toolschema -- <file>``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["NameMap", "to_exported_name"]

_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def to_exported_name(name: str) -> str:
    """Map a registered name to a name model APIs accept (identity for valid names)."""
    if _VALID.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:55]
    return f"{cleaned}_{digest}"


class NameMap:
    """Exported <-> registered names for one set of registered names."""

    def __init__(self, names: Iterable[str]) -> None:
        self._exported = {name: to_exported_name(name) for name in names}
        self._registered = {exported: name for name, exported in self._exported.items()}

    def exported(self, name: str) -> str:
        """The exported name of a registered name."""
        return self._exported[name]

    def registered(self, exported: str) -> str | None:
        """The registered name behind an exported name, or None."""
        return self._registered.get(exported)

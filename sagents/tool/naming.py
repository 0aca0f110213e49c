"""STAND-IN for the ``toolschema`` branch: exported tool names (``^[a-zA-Z0-9_-]{1,64}$``).

Same interface as that branch's module (``to_exported_name``, ``NameMap.build``), reduced; the
lead replaces this file with the real one (``git checkout toolschema -- <file>``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sagents.errors import ToolNameConflictError, UnknownToolError

__all__ = ["NameMap", "to_exported_name"]

_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def to_exported_name(name: str) -> str:
    """Map a registered name to a name model APIs accept (identity for valid names)."""
    if _VALID.match(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stem = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:55]
    return f"{stem}_{digest}" if stem else f"tool_{digest}"


@dataclass(frozen=True, kw_only=True)
class NameMap:
    """Exported <-> registered names for one set of registered names."""

    to_registered: Mapping[str, str] = field(default_factory=dict)
    to_exported: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, names: Iterable[str]) -> NameMap:
        """Map each name; two names on one exported name raise ``ToolNameConflictError``."""
        to_registered: dict[str, str] = {}
        to_exported: dict[str, str] = {}
        for name in names:
            exported = to_exported_name(name)
            if to_registered.get(exported, name) != name:
                raise ToolNameConflictError(f"{name!r} and {to_registered[exported]!r} clash")
            to_registered[exported] = name
            to_exported[name] = exported
        return cls(to_registered=to_registered, to_exported=to_exported)

    def exported(self, name: str) -> str:
        """The exported name of a registered name (``UnknownToolError`` if absent)."""
        try:
            return self.to_exported[name]
        except KeyError:
            raise UnknownToolError(f"no tool named {name!r}") from None

    def registered(self, exported: str) -> str:
        """The registered name behind an exported name (``UnknownToolError`` if absent)."""
        try:
            return self.to_registered[exported]
        except KeyError:
            raise UnknownToolError(f"no tool named {exported!r}") from None

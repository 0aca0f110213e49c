"""Tool names as model APIs accept them: ``^[a-zA-Z0-9_-]{1,64}$`` (docs/tool-schema.md, "Names").

:func:`to_exported_name` is deterministic and leaves a valid name unchanged. Any other name
(dots, slashes, spaces, non-ASCII, more than 64 characters, empty) becomes its characters with
each invalid one replaced by ``_``, cut to leave room, plus ``_`` and 8 hex digits of the
SHA-256 of the original name. The hash keeps ``a.b`` and ``a/b`` apart; a :class:`NameMap`
checks the rare remaining collision (for example a registered name that is literally another
name's exported form) and reports it instead of shadowing a tool.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sagents.errors import ToolNameConflictError, UnknownToolError

__all__ = ["EXPORTED_NAME_PATTERN", "MAX_EXPORTED_NAME_LENGTH", "NameMap", "to_exported_name"]

MAX_EXPORTED_NAME_LENGTH = 64  # OpenAI function names: at most 64 characters
EXPORTED_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LENGTH = 8  # hex digits: 32 bits keep accidental collisions negligible among tool lists


def to_exported_name(name: str) -> str:
    """The name a model sees for the registered tool ``name``.

    Args:
        name: The registered name (any string).

    Returns:
        ``name`` itself when it matches ``^[a-zA-Z0-9_-]{1,64}$``; otherwise the sanitised,
        shortened name with a stable hash suffix (``fleet_get.status`` ->
        ``fleet_get_status_1a2b3c4d``).
    """
    if EXPORTED_NAME_PATTERN.match(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LENGTH]
    stem = _INVALID.sub("_", name)[: MAX_EXPORTED_NAME_LENGTH - _HASH_LENGTH - 1]
    return f"{stem}_{digest}" if stem else f"tool_{digest}"


@dataclass(frozen=True, kw_only=True)
class NameMap:
    """The two-way mapping between registered and exported names of one set of tools.

    Build it with :meth:`build`; it never holds two registered names on one exported name.

    Attributes:
        to_registered: Exported name -> registered name.
        to_exported: Registered name -> exported name.
    """

    to_registered: Mapping[str, str] = field(default_factory=dict)
    to_exported: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, names: Iterable[str]) -> NameMap:
        """Map each registered name to its exported name.

        Raises:
            ToolNameConflictError: when two registered names map to one exported name
                (``details`` holds both and the exported name).
        """
        to_registered: dict[str, str] = {}
        to_exported: dict[str, str] = {}
        for name in names:
            if name in to_exported:
                continue
            exported = to_exported_name(name)
            other = to_registered.get(exported)
            if other is not None:
                raise ToolNameConflictError(
                    f"tools {other!r} and {name!r} would both be exported as {exported!r}",
                    hint="rename one of them",
                    details={"names": [other, name], "exported": exported},
                )
            to_registered[exported] = name
            to_exported[name] = exported
        return cls(to_registered=to_registered, to_exported=to_exported)

    def exported(self, name: str) -> str:
        """The exported name of the registered tool ``name``.

        Raises:
            UnknownToolError: when ``name`` is not in the map.
        """
        try:
            return self.to_exported[name]
        except KeyError:
            raise UnknownToolError(f"no tool named {name!r}") from None

    def registered(self, exported: str) -> str:
        """The registered name behind an exported name (as a model sends it back).

        Raises:
            UnknownToolError: when no tool is exported under that name.
        """
        try:
            return self.to_registered[exported]
        except KeyError:
            raise UnknownToolError(
                f"no tool named {exported!r}", hint="call one of the tools you were given"
            ) from None

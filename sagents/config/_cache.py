"""A result cache for read-only tools: the config's ``cache`` as one
:class:`~sagents.tool.ToolMiddleware` (docs/gateway.md, "Result cache").

A call of a tool whose permission class is ``read_only`` at call time, and whose name the
cache's ``match`` glob names, is answered from the cache when the same tool was called with the
same arguments (compared as canonical JSON) by the same principal (the caller's identity; a
session without one only shares with itself) less than ``ttlSec`` seconds ago: the tool does not
run (:meth:`~sagents.tool.HookDecision.respond`). Only successful results are kept; at most
``maxEntries`` of them, the least recently used going first.
"""

from __future__ import annotations

import collections
import fnmatch
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from sagents.core._result import ToolResult
from sagents.tool._call import ToolRequest
from sagents.tool._context import PRINCIPAL_KEY
from sagents.tool._middleware import HookDecision

__all__ = ["CacheSettings", "ResultCache"]

_Key = tuple[str, str, str, str]  # tool, whose kind ("principal" | "session" | ""), who, arguments


@dataclass(frozen=True, kw_only=True)
class CacheSettings:
    """The ``cache`` section: results of the tools ``match`` names kept ``ttl_s`` seconds, at
    most ``max_entries`` of them."""

    ttl_s: float
    max_entries: int = 1000
    match: str = "*"


class ResultCache:
    """The cache as one middleware.

    Args:
        settings: The ``cache`` section.
        permission_of: The permission class of a registered tool, at call time.
        clock: Seconds of a monotonic clock (tests pass their own).
    """

    def __init__(
        self,
        settings: CacheSettings,
        *,
        permission_of: Callable[[str], str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._permission_of = permission_of
        self._clock = clock
        self._kept: collections.OrderedDict[_Key, tuple[float, ToolResult]] = (
            collections.OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._kept)

    async def before_call(self, call: ToolRequest) -> HookDecision:
        """Answer the call with a kept result, or let it run."""
        key = self._key(call)
        kept = None if key is None else self._kept.get(key)
        if key is None or kept is None:
            return HookDecision.allow()
        stored_at, result = kept
        if self._clock() - stored_at >= self.settings.ttl_s:
            del self._kept[key]
            return HookDecision.allow()
        self._kept.move_to_end(key)
        return HookDecision.respond(result)

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        """Keep a successful result of a cached tool (a result served from here stays as it
        was kept: its age is not renewed); the result goes on unchanged."""
        key = None if result.is_error else self._key(call)
        if key is None:
            return result
        kept = self._kept.get(key)
        if kept is not None and kept[1] is result:
            return result
        self._kept[key] = (self._clock(), result)
        self._kept.move_to_end(key)
        while len(self._kept) > self.settings.max_entries:
            self._kept.popitem(last=False)
        return result

    def _key(self, call: ToolRequest) -> _Key | None:
        """The cache key of ``call``, or None when its results are not cached."""
        if not fnmatch.fnmatchcase(call.name, self.settings.match):
            return None
        if self._permission_of(call.name) != "read_only":
            return None
        try:
            arguments = json.dumps(
                call.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
        except (TypeError, ValueError):  # not JSON (a raw string, a NaN): not cached
            return None
        context = call.session_context
        if context is None:
            return (call.name, "", "", arguments)
        principal = context.trusted.get(PRINCIPAL_KEY)
        if principal:
            return (call.name, "principal", str(principal), arguments)
        return (call.name, "session", context.session_id, arguments)

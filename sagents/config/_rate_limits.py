"""Rate limits per tool and principal: the config's ``rateLimits`` as one
:class:`~sagents.tool.ToolMiddleware` (docs/gateway.md, "Rate limits").

Each limit names tools by a glob (``match``) and allows at most ``calls`` calls of each such
tool per ``perSec`` seconds for each principal (the caller's identity; a session without one is
counted by its session id). A call over the limit does not run: it is refused (``not_allowed``)
saying which limit and when the next call may run. The window slides: a call counts for
``perSec`` seconds after it was let through. Refused calls do not count.
"""

from __future__ import annotations

import collections
import fnmatch
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sagents.core._result import ToolResult
from sagents.tool._call import ToolRequest
from sagents.tool._context import PRINCIPAL_KEY
from sagents.tool._middleware import HookDecision

__all__ = ["RateLimit", "RateLimits"]


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """One configured limit: at most ``calls`` per ``per_s`` seconds, per tool and principal."""

    match: str
    calls: int
    per_s: float


class RateLimits:
    """The configured limits as one middleware; the first limit whose ``match`` names the tool
    applies.

    Args:
        limits: In file order.
        clock: Seconds of a monotonic clock (tests pass their own).
    """

    def __init__(
        self, limits: Sequence[RateLimit], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = tuple(limits)
        self._clock = clock
        self._let_through: dict[tuple[str, str], collections.deque[float]] = {}

    async def before_call(self, call: ToolRequest) -> HookDecision:
        """Let the call through, or refuse it when its tool and principal are over the limit."""
        limit = next(
            (each for each in self.limits if fnmatch.fnmatchcase(call.name, each.match)), None
        )
        if limit is None:
            return HookDecision.allow()
        context = call.session_context
        who = ""
        if context is not None:
            who = str(context.trusted.get(PRINCIPAL_KEY) or f"session {context.session_id}")
        now = self._clock()
        times = self._let_through.setdefault((call.name, who), collections.deque())
        while times and times[0] <= now - limit.per_s:
            times.popleft()
        if len(times) >= limit.calls:
            wait = math.ceil(times[0] + limit.per_s - now)
            return HookDecision.deny(
                f"rate limit: at most {limit.calls} calls of {call.name!r} per {limit.per_s:g} s"
                f"{f' for {who}' if who else ''}; the next one may run in {max(wait, 1)} s"
            )
        times.append(now)
        return HookDecision.allow()

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        """The result, unchanged."""
        return result

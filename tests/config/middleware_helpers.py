"""What the tests of the config's built-in middleware (rate limits, result cache) share: a
clock the test moves (no sleeps) and a session of a principal."""

from __future__ import annotations

from sagents.tool import SessionContext


class Clock:
    """Seconds of a clock that moves only when the test sets ``now``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def as_principal(principal: str) -> SessionContext:
    """A session whose trusted principal is ``principal``."""
    return SessionContext(session_id=f"session-of-{principal}", trusted={"principal": principal})

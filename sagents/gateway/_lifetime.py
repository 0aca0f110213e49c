"""The one owner of what each client session of the gateway holds beyond its requests
(docs/gateway.md, "Sessions and workspaces").

A session holds, once it used them: its sandbox and the spare sandbox kept for its next
``run_script`` (processes, cgroups, descriptors), its run_script host, its forwarded resources'
subscriptions, and the records of its finished background calls. :class:`SessionLifetimes`
releases them:

- when the session ends: the client's ``DELETE``, its transport closing (stdio, a dropped
  HTTP connection once the SDK's session idle timeout expires it), told by
  :meth:`SessionLifetimes.ended` from the connection's teardown;
- when a session that no connection carries (a 2026-07-28 client's, one per token and
  profile) has had no call in flight and no background call running for
  ``sessionIdleTimeout`` seconds: only its sandboxes and run_script host are released (the
  next call starts them again, over the same workspace); its grants stay;
- a background call still running keeps everything until it finishes (it may be waiting
  for an approval: idle expiry never drops one), then the release goes on.

A failed release is logged and never ends the gateway.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Protocol, runtime_checkable

import anyio
import anyio.abc

from sagents.core._lifespan import Lifespan
from sagents.gateway._subscriptions import ResourceRelay
from sagents.gateway._tasks import GatewayTasks

__all__ = ["DEFAULT_SESSION_IDLE_TIMEOUT_S", "ReleasingScriptHost", "SessionLifetimes"]

logger = logging.getLogger(__name__)

DEFAULT_SESSION_IDLE_TIMEOUT_S = 1800.0
"""``sessionIdleTimeout`` when the config sets none: 30 minutes (the ``mcp`` SDK's default
for streamable HTTP sessions)."""
_MAX_SWEEP_INTERVAL_S = 60.0  # the idle sweep looks at least this often


@runtime_checkable
class ReleasingScriptHost(Protocol):
    """A run_script host that holds per-session resources (``GatewayScripts``)."""

    async def release(self, session_id: str, *, only_if: Callable[[], bool] | None = None) -> None:
        """End what the session holds (a later call of the session starts afresh); with
        ``only_if``, only if it still holds once no call can take the session's host."""
        ...


@dataclass(kw_only=True)
class _Use:
    in_flight: int = 0
    last_used: float = 0.0
    released: bool = False  # since its last call


class SessionLifetimes(Lifespan):
    """Releases each session's resources once it ends or idles; an async context manager.

    Args:
        tasks: The gateway's background calls (running ones delay a release).
        scripts: The run_script host, or None.
        relay: The forwarded resources' subscriptions, or None.
        idle_timeout_s: Seconds without a call after which a connectionless session's
            sandboxes are released; None never.

    Raises:
        ValueError: ``idle_timeout_s`` is not a positive, finite number or None.
    """

    def __init__(
        self,
        tasks: GatewayTasks,
        *,
        scripts: object | None,
        relay: ResourceRelay | None,
        idle_timeout_s: float | None,
    ) -> None:
        if idle_timeout_s is not None and not (
            math.isfinite(idle_timeout_s) and idle_timeout_s > 0
        ):
            raise ValueError(
                f"session_idle_timeout_s must be a positive number of seconds or None, got "
                f"{idle_timeout_s!r}"
            )
        self._tasks = tasks
        self._scripts = scripts if isinstance(scripts, ReleasingScriptHost) else None
        self._relay = relay
        self.idle_timeout_s = idle_timeout_s
        self._uses: dict[str, _Use] = {}  # connectionless sessions, for the idle sweep
        self._tg: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            if self.idle_timeout_s is not None:
                tg.start_soon(self._sweep_idle, self.idle_timeout_s)
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                # Releases still waiting are cancelled: whoever owns the hosts closes them all.
                tg.cancel_scope.cancel()

    def ended(self, session_id: str) -> None:
        """The session ended: release what it holds, once its running background calls
        have finished (never blocks)."""
        self._uses.pop(session_id, None)
        if self._tg is not None:
            self._tg.start_soon(self._release, session_id, True)

    @contextmanager
    def in_use(self, session_id: str, *, connectionless: bool) -> Iterator[None]:
        """Mark a call of the session in flight; a ``connectionless`` session (no transport
        tells when it ends) is then not idle, and is swept once idle for the timeout."""
        if not connectionless:
            yield  # its transport's end (or the SDK's idle expiry) ends it: see ended()
            return
        use = self._uses.setdefault(session_id, _Use())
        use.in_flight += 1
        use.released = False
        try:
            yield
        finally:
            use.in_flight -= 1
            use.last_used = anyio.current_time()

    def idle(self, session_id: str, now: float) -> bool:
        """Whether a connectionless session holding resources has been idle for the timeout
        at ``now`` (no call in flight, no background call running)."""
        use = self._uses.get(session_id)
        if use is None or use.released or use.in_flight or self.idle_timeout_s is None:
            return False
        if self._tasks.live.running(session_id):
            return False  # a background call (perhaps waiting for an approval) holds it
        return now - use.last_used >= self.idle_timeout_s

    async def _sweep_idle(self, timeout_s: float) -> None:
        interval = min(timeout_s / 2, _MAX_SWEEP_INTERVAL_S)
        while True:
            await anyio.sleep(interval)
            now = anyio.current_time()
            for session_id in [s for s in self._uses if self.idle(s, now)]:
                logger.info("session %s is idle: its sandboxes are released", session_id)
                await self._release(session_id, False, partial(self.idle, session_id, now))
                use = self._uses.get(session_id)
                if use is not None and self.idle(session_id, now):
                    use.released = True

    async def _release(
        self, session_id: str, ended: bool, only_if: Callable[[], bool] | None = None
    ) -> None:
        try:
            await self._tasks.live.wait_session(session_id)
            if self._scripts is not None:
                await self._scripts.release(session_id, only_if=only_if)
            if ended:
                self._tasks.forget_session(session_id)
                if self._relay is not None:
                    self._relay.drop(f"session:{session_id}")
        except Exception:
            # A release that fails leaves that session's resources, never the gateway.
            logger.exception("releasing the resources of session %s failed", session_id)

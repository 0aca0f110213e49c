"""The scopes around one upstream call on a :class:`~sagents.mcp._connection.ServerConnection`:
:class:`CallScope` (the connection's end cancels the call, so no call outlives its connection)
and :class:`CallSlot` (one of the server's ``max_concurrency`` slots).
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

import anyio

__all__ = ["CallScope", "CallSlot"]


class CallScope:
    """The context manager of :meth:`ServerConnection.call_scope` (no generator per call).

    ``with`` gives an anyio cancel scope. ``async with`` on asyncio arms nothing: it notes the
    task, and :meth:`cancel` has the loop cancel that task, the way ``asyncio.timeout`` does
    when it expires (Python docs, "Timeouts"), and the exit takes back exactly that cancellation
    (``Task.uncancel``), at a fraction of a cancel scope's (or an ``asyncio.Timeout``'s) cost
    per call; on other loops (trio) the cancel scope again. Either way :attr:`cancelled_caught`
    says whether the connection's end stopped the block.
    """

    __slots__ = (
        "_cancelling",
        "_fired",
        "_handle",
        "_left",
        "_scope",
        "_scopes",
        "_task",
        "cancelled_caught",
    )

    def __init__(self, scopes: set[CallScope]) -> None:
        self._scopes = scopes
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._handle: asyncio.Handle | None = None
        self._fired = False
        self._left = False
        self.cancelled_caught = False

    def cancel(self) -> None:
        """End the block (the connection died or closes)."""
        if self._task is not None:
            if self._handle is None and not self._left:
                # From the loop, as asyncio.Timeout does: the block is then waiting, and its
                # exit can still call this off if it leaves first.
                self._handle = self._task.get_loop().call_soon(self._deliver)
        elif self._scope is not None:
            self._scope.cancel()

    def _deliver(self) -> None:
        assert self._task is not None
        self._fired = True
        self._task.cancel()

    def __enter__(self) -> CallScope:
        self._scope = anyio.CancelScope().__enter__()
        self._scopes.add(self)
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._scopes.discard(self)
        assert self._scope is not None
        swallowed = self._scope.__exit__(et, ev, tb)
        self.cancelled_caught = self._scope.cancelled_caught
        return bool(swallowed)

    async def __aenter__(self) -> CallScope:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no asyncio loop runs (trio)
            task = None
        if task is None:  # not asyncio: a cancel scope
            return self.__enter__()
        self._task = task
        self._cancelling = task.cancelling()
        self._scopes.add(self)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> bool:
        task = self._task
        if task is None:
            return self.__exit__(et, ev, tb)
        self._scopes.discard(self)
        self._left = True
        if self._handle is not None and not self._fired:
            self._handle.cancel()  # asked for, not delivered: the block left first
            return False
        # As asyncio.Timeout's exit: the cancellation this scope asked for is taken back; the
        # block's CancelledError is swallowed only when no other cancellation is pending.
        if self._fired and task.uncancel() <= self._cancelling and et is asyncio.CancelledError:
            self.cancelled_caught = True
            return True
        return False


class CallSlot:
    """The async context manager of :meth:`ServerConnection.call_slot`."""

    __slots__ = ("_limiter",)

    def __init__(self, limiter: anyio.Semaphore) -> None:
        self._limiter = limiter

    async def __aenter__(self) -> None:
        try:
            self._limiter.acquire_nowait()
        except anyio.WouldBlock:
            await self._limiter.acquire()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._limiter.release()

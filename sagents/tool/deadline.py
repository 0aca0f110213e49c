"""Awaiting a tool's coroutine under its timeout, without a timer for calls that never wait.

A timeout can only take effect where a coroutine suspends: cancellation is delivered at an
``await`` that yields to the event loop. A trivial tool (``async def add(a, b)``) never does, so
for it a cancel scope and a timer, armed and disarmed on every call, cost more than the call
itself. :func:`await_within` therefore runs the coroutine's first step directly, and arms the
timeout (``asyncio.timeout``, Python docs "Timeouts") only if the coroutine suspends; from there
on the call is bounded exactly as ``anyio.move_on_after`` would bound it. On other event loops
than asyncio (trio), the coroutine runs inside ``anyio.move_on_after`` from its start, because
a cancel scope cannot be entered under one the coroutine already entered.

One difference, invisible to a call's result: during the first step (before the coroutine first
suspends), ``anyio.current_effective_deadline()`` does not see the call's timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from types import CoroutineType
from typing import Any, Generic, TypeVar

import anyio

__all__ = ["await_within"]

T = TypeVar("T")


async def await_within(coroutine: Awaitable[T], seconds: float) -> tuple[bool, T | None]:
    """Await ``coroutine``, at most ``seconds`` once it suspends.

    Args:
        coroutine: What the tool function returned: a coroutine object not started yet, or
            any other awaitable (awaited in ``anyio.move_on_after``).
        seconds: The timeout in seconds (positive; ``math.inf`` for none).

    Returns:
        ``(True, value)`` when the coroutine returned ``value``; ``(False, None)`` when the
        timeout ended it (it was cancelled at the ``await`` where it waited).

    Raises:
        Whatever the coroutine raises; the caller's cancellation.
    """
    if type(coroutine) is not CoroutineType or asyncio._get_running_loop() is None:
        # Another awaitable, or not asyncio: the cancel scope from the start.
        with anyio.move_on_after(seconds):
            return True, await coroutine
        return False, None
    try:
        yielded = coroutine.send(None)
    except StopIteration as stop:  # returned without waiting: no timer was needed
        value: T = stop.value
        return True, value
    timeout = asyncio.timeout(seconds)
    try:
        async with timeout:
            return True, await _Resumed(coroutine, yielded)
    except TimeoutError:
        if timeout.expired():
            return False, None
        raise  # the tool's own TimeoutError


class _Resumed(Generic[T]):
    """Awaits the rest of a coroutine whose first step already ran and yielded ``yielded``.

    What ``yield from`` does (PEP 380), for a coroutine that was started by hand: every value
    the event loop sends or throws goes to the coroutine, every value it yields goes up.
    """

    __slots__ = ("_coroutine", "_yielded")

    def __init__(self, coroutine: Coroutine[Any, Any, T], yielded: Any) -> None:
        self._coroutine = coroutine
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, T]:
        coroutine, yielded = self._coroutine, self._yielded
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as error:  # noqa: BLE001 - thrown in by the loop: passed on
                try:
                    yielded = coroutine.throw(error)
                except StopIteration as stop:
                    result: T = stop.value
                    return result
            else:
                try:
                    yielded = coroutine.send(sent)
                except StopIteration as stop:
                    result = stop.value
                    return result

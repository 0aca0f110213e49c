"""Awaiting a tool's coroutine under its timeout, without a timer for calls that never wait.

An optimisation kept because ``bench/bench_tool_dispatch.py`` shows it matters: a timer armed
and disarmed around every call (an anyio cancel scope, or ``asyncio.timeout``) costs about
5 µs, more than a whole call of a trivial tool, and takes ``run_tool`` past its goal against
pydantic-ai's ``FunctionToolset`` (at most 2 ×).

A timeout can only take effect where a coroutine suspends: cancellation is delivered at an
``await`` that yields to the event loop. A trivial tool (``async def add(a, b)``) never does.
:func:`await_within` therefore runs the coroutine's first step itself (the coroutine protocol,
PEP 492: ``send``/``throw``), and arms the timeout (``asyncio.timeout_at``, Python docs
"Timeouts") only if the coroutine suspends, at the deadline counted from before that first
step; from there on the call is bounded exactly as ``anyio.move_on_after`` would bound it (work
done before the first wait counts, and a first wait after the deadline ends the call at once).
On other event loops than asyncio (trio), the coroutine runs inside ``anyio.move_on_after``
from its start, because a cancel scope cannot be entered under one the coroutine already
entered. Only public APIs are used.

Two differences, invisible to a well-behaved tool's result: on asyncio the timeout is asyncio's
own, not an anyio cancel scope, so ``anyio.current_effective_deadline()`` inside the tool does not
include it (an enclosing scope's deadline still shows); and it cancels the tool once, where a
cancel scope cancels it at every later wait too, so a tool that catches the cancellation and goes
on runs to its end. On either loop, a tool that returns after the deadline this way gets a
timeout, not its late answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from types import CoroutineType
from typing import Any, Generic, TypeVar

import anyio

__all__ = ["await_within", "finish_within", "first_step"]

T = TypeVar("T")

_NOT_STARTED: Any = object()


def first_step(coroutine: Awaitable[T]) -> tuple[bool, Any]:
    """Run a coroutine's first step here, on asyncio (see the module docstring).

    A plain function, not a coroutine: a trivial tool's call then costs no frame of ours
    (measured by ``bench/bench_tool_dispatch.py``, a trivial tool against pydantic-ai's).

    Args:
        coroutine: What the tool's handler returned, not started yet.

    Returns:
        ``(True, value)`` when the coroutine returned ``value`` without waiting; else
        ``(False, state)``, to pass to :func:`finish_within`.

    Raises:
        Whatever the coroutine raises in its first step.
    """
    if type(coroutine) is not CoroutineType:
        return False, _NOT_STARTED  # another awaitable: awaited under a cancel scope
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): a cancel scope from the start
        return False, _NOT_STARTED
    started = loop.time()  # the timeout counts from here, the work before the first wait too
    try:
        return False, _Suspended(coroutine.send(None), started)
    except StopIteration as stop:  # returned without waiting: no timer was needed
        return True, stop.value


async def finish_within(
    coroutine: Awaitable[T], state: Any, seconds: float
) -> tuple[bool, T | None]:
    """Await the rest of ``coroutine`` after :func:`first_step`, at most ``seconds`` from the
    call's start (before its first step).

    Returns:
        ``(True, value)`` when it returned ``value`` in time; ``(False, None)`` when the timeout
        ended it (cancelled at the ``await`` where it waited), or it returned after the deadline
        (it caught the cancellation and went on).

    Raises:
        Whatever the coroutine raises; the caller's cancellation.
    """
    if state is _NOT_STARTED:
        with anyio.move_on_after(seconds) as scope:
            value = await coroutine
        return (False, None) if scope.cancel_called else (True, value)
    assert isinstance(coroutine, CoroutineType)
    assert isinstance(state, _Suspended)
    timeout = asyncio.timeout_at(state.started + seconds)  # already past: ends it at once
    try:
        async with timeout:
            value = await _Resumed(coroutine, state.yielded)
    except TimeoutError:
        if timeout.expired():
            return False, None
        raise  # the tool's own TimeoutError
    return (False, None) if timeout.expired() else (True, value)


async def await_within(coroutine: Awaitable[T], seconds: float) -> tuple[bool, T | None]:
    """Await ``coroutine``, at most ``seconds``: :func:`first_step`, then
    :func:`finish_within` if it waited.

    Args:
        coroutine: What the tool's handler returned: a coroutine object not started yet, or
            any other awaitable (awaited in ``anyio.move_on_after``).
        seconds: The timeout in seconds (positive; ``math.inf`` for none).
    """
    done, state = first_step(coroutine)
    if done:
        result: T = state
        return True, result
    return await finish_within(coroutine, state, seconds)


class _Suspended:
    """Where :func:`first_step` left a coroutine: what it yielded, and when the call started
    (the event loop's clock, seconds)."""

    __slots__ = ("started", "yielded")

    def __init__(self, yielded: Any, started: float) -> None:
        self.yielded = yielded
        self.started = started


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
                if sent is None:
                    # What asyncio's task always sends: ``yield from`` starts by sending None,
                    # so the rest is delegated natively (no Python frame per resumption).
                    return (yield from coroutine.__await__())
                try:
                    yielded = coroutine.send(sent)
                except StopIteration as stop:
                    result = stop.value
                    return result

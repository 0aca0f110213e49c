"""Run helper tasks beside a body without wrapping the body's own exception in a group.

An anyio task group turns an exception raised by its host body into an ``ExceptionGroup``; the
body here is a tool call or a consumer's loop, whose callers catch exact types,
so the body's exception must come out unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

__all__ = ["run_beside"]


@asynccontextmanager
async def run_beside(
    *helpers: Callable[[], Coroutine[Any, Any, None]],
) -> AsyncIterator[anyio.abc.TaskGroup]:
    """Run ``helpers`` as tasks while the body runs; cancel them when it ends.

    The helpers must not raise (an error in one cancels the body and comes out in a group).
    The body's exception, if any, is re-raised unchanged after the helpers have ended.

    Args:
        helpers: Zero-argument coroutine functions.

    Yields:
        The task group, to start more helpers (under the same rules) while the body runs.
    """
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        for helper in helpers:
            tg.start_soon(helper)
        try:
            yield tg
        except BaseException as exc:  # noqa: BLE001 - re-raised below, outside the task group
            failure = exc
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure

"""Polling an upstream task against hearing its ``notifications/tasks``.

Run: ``.venv/bin/python bench/bench_task_notifications.py``. The upstream is a ``sagents``
gateway in this process (its Tasks extension, ``pollIntervalMs`` 1000) whose tool works for
``WORK_S`` seconds; the call becomes a task after 0.05 s. In the same run:

- baseline: ``call_tool_or_task`` without task statuses (polls ``tasks/get`` at the server's
  interval);
- notified: with :class:`sagents.mcp._tasks_client.TaskStatuses` (a ``subscriptions/listen``
  stream naming the task; polls only as a fallback).

Prints, per mode, the median ``tasks/get`` requests per call and the median delay between the
work's end and the caller's result, and the ratios (not a test; numbers vary with load).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from typing import Any

import anyio
from mcp import Client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.gateway import Gateway
from sagents.mcp._tasks_client import TasksClient, TaskStatuses, call_tool_or_task
from sagents.tool import ToolRequest
from sagents.tool._spec_provider import SpecProvider

WORK_S = 2.5  # not a multiple of the poll interval: the baseline waits for its next poll
REPEATS = 5


class Worker(SpecProvider):
    """One tool, ``work``, that takes ``WORK_S`` seconds and notes when it ended."""

    def __init__(self) -> None:
        self.ended_at = 0.0

    def list_specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="work",
                description="Works for a while.",
                input_schema={"type": "object", "properties": {}},
                permission="read_only",
                source=ToolSource(kind="local"),
            )
        ]

    async def call(self, request: ToolRequest) -> ToolResult:
        await anyio.sleep(WORK_S)
        self.ended_at = time.perf_counter()
        return ToolResult.from_text("done")


async def one_call(notified: bool) -> tuple[int, float]:
    worker = Worker()
    seen: Counter[str] = Counter()

    async def count(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        seen[ctx.method] += 1
        return await call_next(ctx)

    statuses = TaskStatuses() if notified else None
    async with Gateway(worker, mode="auto", background_after_s=0.05) as upstream:
        upstream.server.middleware.append(count)
        async with Client(upstream.server, extensions=[TasksClient(statuses)]) as client:
            result = await call_tool_or_task(client.session, "work", {}, statuses=statuses)
            delay = time.perf_counter() - worker.ended_at
    assert not result.is_error, result
    return seen["tasks/get"], delay


async def main() -> None:
    rows: dict[str, tuple[float, float]] = {}
    for label, notified in (("baseline (polling)", False), ("notified", True)):
        polls, delays = [], []
        for _ in range(REPEATS):
            count, delay = await one_call(notified)
            polls.append(count)
            delays.append(delay)
        rows[label] = (statistics.median(polls), statistics.median(delays) * 1000)
        print(
            f"{label:20} tasks/get per call: {rows[label][0]:4.0f}   "
            f"result after the work ended: {rows[label][1]:7.1f} ms"
        )
    base, notified_row = rows["baseline (polling)"], rows["notified"]
    print(f"polls ratio (notified / baseline): {notified_row[0] / max(base[0], 1):.2f}")
    print(f"delay ratio (notified / baseline): {notified_row[1] / max(base[1], 1e-6):.3f}")


if __name__ == "__main__":
    anyio.run(main)

"""The host side of run_script's calls, without the sandbox or an upstream: the dispatcher's CPU
per call (parse, checks, queue, workers, reply, ``calls.jsonl``), against the same calls made
without it in the same run. Not a test: prints figures and ratios.

The script's side is simulated in the host process (``call_many``'s batches of 50 request lines,
at most two batches outstanding) over the in-memory transport; the tool answers after one loop
turn. The baseline makes the same number of calls of the same tool from 4 tasks, as 4 workers
would, with nothing around them. Figures are CPU time (``time.process_time``) per call, min /
median of 7 rounds of 5,000 calls; "overhead" is the dispatcher's CPU per call minus the
baseline's.

Run: ``.venv/bin/python bench/bench_script_dispatch.py [--json]``
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.script import _protocol as protocol
from sagents.script._dispatcher import ScriptDispatcher
from sagents.script._policy import plan_script
from sagents.script._records import ScriptRecords
from sagents.script._transport import memory_transport_pair

CALLS = 5000
ROUNDS = 7
CONCURRENCY = 4
TOOL = "fleet__get_device_status"
STATUS = {"sn": "SN0001", "status": "online", "battery": 87, "temp": 21.5, "fw": "1.2.3"}
RESULT = ToolResult(content=ToolResult.from_text(json.dumps(STATUS)).content, structured=STATUS)
SPEC = ToolSpec(
    name=TOOL, description="status", input_schema={"type": "object"}, permission="read_only"
)
LINES = [
    protocol.encode_line({"id": i, "op": "call", "tool": TOOL, "args": {"sn": f"SN{i:04d}"}})
    for i in range(CALLS)
]


async def _tool(name: str, arguments: dict[str, Any]) -> ToolResult:
    await anyio.lowlevel.checkpoint()
    return RESULT


async def _dispatched(records: bool) -> float:
    workspace = Path(tempfile.mkdtemp(prefix="sagents-bench-"))
    log = ScriptRecords.create(workspace, "run", "") if records else None
    dispatcher = ScriptDispatcher(
        plan=plan_script([SPEC], (), "auto"),
        call_tool=_tool,
        max_calls=CALLS,
        max_concurrency=CONCURRENCY,
        record=log.write_call if log is not None else None,
        on_change=lambda: None,
    )
    transport, to_host, from_host = memory_transport_pair()
    replies = 0

    async def guest() -> None:
        nonlocal replies
        batch = protocol.CALL_MANY_BATCH
        async with to_host:
            for start in range(0, CALLS, batch):
                await to_host.send(b"".join(LINES[start : start + batch]))
                while replies < start - batch:  # at most two batches outstanding
                    replies += (await from_host.receive()).count(b"\n")
        while replies < CALLS:
            replies += (await from_host.receive()).count(b"\n")

    started = time.process_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(guest)
        await dispatcher.serve(transport)
    elapsed = time.process_time() - started
    if log is not None:
        log.close()
    return elapsed / CALLS * 1e6


async def _plain() -> float:
    arguments = [{"sn": f"SN{i:04d}"} for i in range(CALLS)]
    index = iter(range(CALLS))

    async def worker() -> None:
        for i in index:
            await _tool(TOOL, arguments[i])

    started = time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(CONCURRENCY):
            tg.start_soon(worker)
    return (time.process_time() - started) / CALLS * 1e6


async def main() -> None:
    figures: dict[str, float] = {}
    rounds: dict[str, list[float]] = {"plain": [], "no records": [], "records": []}
    for _ in range(ROUNDS):  # alternating, so the load falls on each alike
        rounds["plain"].append(await _plain())
        rounds["no records"].append(await _dispatched(records=False))
        rounds["records"].append(await _dispatched(records=True))
    plain = statistics.median(rounds["plain"])
    for name, values in rounds.items():
        low, mid = min(values), statistics.median(values)
        figures[f"{name} us/call min"] = low
        figures[f"{name} us/call median"] = mid
        if name != "plain":
            figures[f"{name} overhead us/call"] = mid - plain
            figures[f"{name} ratio to plain"] = mid / plain
        if "--json" not in sys.argv[1:]:
            extra = "" if name == "plain" else f"  overhead {mid - plain:6.1f} us/call"
            print(f"{name:11} {low:6.1f} / {mid:6.1f} us/call (min / median){extra}")
    if "--json" in sys.argv[1:]:
        print(json.dumps(figures))


if __name__ == "__main__":
    anyio.run(main)

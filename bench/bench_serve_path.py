"""Where a call forwarded by ``sagents serve`` spends its latency, at concurrency 1.

``sagents serve`` (stdio) with ``tests/mcp/servers/fault_server.py`` as its only upstream is
driven by the ``mcp`` SDK's stdio client, one call at a time. The serve process runs under
``bench/_serve_timeline.py``, which records a timestamp (``time.perf_counter_ns``) at each
``os.read`` / ``os.write`` of a wire and at the entry and exit of the steps of a forwarded
call (the SDK server's dispatch, the gateway's handler, ``ToolManager.run_tool``, the supervisor,
the SDK client's ``send_request``). The median and 10th percentile of each step over the calls
(the first tenth left out) are printed: which part of the critical path is the proxy's, and of
it which is the SDK's, the gateway's and the upstream client's. The recording itself adds about
1-2 µs per step.

Run: ``.venv/bin/python bench/bench_serve_path.py [calls, default 2000]``.
"""

from __future__ import annotations

import collections
import os
import statistics
import sys
import tempfile
from pathlib import Path

import anyio
from bench_serve_proxy import echo_config
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
TIMELINE = ROOT / "bench" / "_serve_timeline.py"


async def drive(calls: int, out: Path, data: str) -> None:
    config = echo_config(data)
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(TIMELINE), "serve", "--config", str(config), "--mode", "auto"],
        env={**os.environ, "SAGENTS_DATA_DIR": data, "SERVE_TIMELINE_OUT": str(out)},
    )
    async with Client(params) as client:
        for _ in range(calls):
            result = await client.call_tool("echo__echo", {"text": "x"})
            assert not result.is_error, result


def analyse(out: Path) -> list[tuple[str, str, float, float]]:
    """``(from, to, median µs, p10 µs)`` per step of the most common sequence of one call."""
    events = [(int(t), label) for t, label in (line.split() for line in out.open())]
    # a call starts at the read that precedes the SDK's dispatch of a request
    starts: collections.Counter[str] = collections.Counter()
    last_read = None
    for _, label in events:
        if label == "sdk_handle>" and last_read is not None:
            starts[last_read] += 1
        if label.startswith("read"):
            last_read = label
    start = starts.most_common(1)[0][0]
    cycles: list[list[tuple[int, str]]] = []
    for t, label in events:
        if label == start:
            cycles.append([])
        if cycles:
            cycles[-1].append((t, label))
    cycles = cycles[len(cycles) // 10 : -1]
    shapes = collections.Counter(tuple(label for _, label in cycle) for cycle in cycles)
    shape = shapes.most_common(1)[0][0]
    chosen = [cycle for cycle in cycles if tuple(label for _, label in cycle) == shape]
    steps = []
    for i in range(1, len(shape)):
        spans = sorted((cycle[i][0] - cycle[i - 1][0]) / 1e3 for cycle in chosen)
        steps.append((shape[i - 1], shape[i], statistics.median(spans), spans[len(spans) // 10]))
    return steps


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as data:
        out = Path(data) / "timeline.txt"
        anyio.run(drive, calls, out, data)
        steps = analyse(out)
    print(f"{'step':<48} {'median µs':>10} {'p10 µs':>8}")
    for before, after, median, p10 in steps:
        print(f"{before + ' -> ' + after:<48} {median:10.1f} {p10:8.1f}")
    total = "the request's read to its end, in all"
    print(f"{total:<48} {sum(s[2] for s in steps):10.1f}")


if __name__ == "__main__":
    main()

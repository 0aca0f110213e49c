"""The cost of OpenTelemetry tracing (docs/observability.md, "Traces") on the gateway's two
busiest paths, as ratios against a baseline measured in the same run.

Each measurement is a child process (a tracer provider is set once per process) that opens a
gateway on the bundled fleet server (``open_gateway``, ``--mode auto``), connects the MCP SDK's
client to it in memory and measures the gateway process's CPU time (``time.process_time``) of

- **MCP run_tool**: ``CALLS`` ``tools/call`` of ``fleet__get_device_status``, four at a time;
- **run_script call_many**: one ``run_script`` whose script makes ``SCRIPT_CALLS`` calls with
  ``call_many``.

Modes, in rotated order in each of ``ROUNDS`` rounds:

- ``baseline``: no tracer provider, and sagents' own tracing checks replaced by a constant
  ``False`` (what the code costs without them);
- ``off``: no tracer provider, as shipped (the default: only the checks run);
- ``in-memory``: the OpenTelemetry SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into
  an ``InMemorySpanExporter`` (every span built, ended and kept; each exported as it ends, in
  the request's path: the tests' set-up);
- ``in-memory-batch``: the same exporter behind a ``BatchSpanProcessor``, what a deployment
  configures (docs/observability.md): spans are exported by the processor's thread, whose CPU
  the process time counts too (each measurement ends with a ``force_flush``, inside it).

The bench's MCP client runs in the gateway's process, so with a tracer provider its own
``MCP send tools/call`` span (one of the three spans of a traced ``tools/call``) is counted
too: the traced figures overstate the gateway's own share a little.

Each figure is the median over the rounds; the ratio is against ``baseline``, with the range
of the rounds' own ratios (each mode against the baseline of its round) as the noise to read it
with. Goals: ``off`` ≤ 1.05, both in-memory modes ≤ 1.20. What ``off`` adds (one check per
traced point) is a few microseconds, below the rounds' noise on a loaded machine, so it is also
timed alone and given as a share of a baseline call. Not a test.

Usage: ``.venv/bin/python bench/bench_tracing.py [ROUNDS]`` (the OpenTelemetry SDK is needed
for the in-memory mode: ``pip install 'sagents[otel]'``, part of the test set-up).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
MODES = ("baseline", "off", "in-memory", "in-memory-batch")
ROUNDS = 3
CALLS = 400
SCRIPT_CALLS = 500
CONCURRENCY = 4
SCRIPT = f"""
from agent_tools import call_many
calls = [{{"sn": f"SN{{i:04d}}"}} for i in range({SCRIPT_CALLS})]
rows = call_many("fleet__get_device_status", calls)
print(len(rows))
"""


def _set_up(mode: str) -> tuple[Any, Any]:
    """The mode's tracing; returns the in-memory exporter and the tracer provider (None, None
    for the others)."""
    if mode == "baseline":
        import sagents.core._tracing as tracing
        import sagents.script._dispatcher as dispatcher

        for module in (tracing, dispatcher):  # the two modules that call the check
            setattr(module, "tracing", lambda: False)  # noqa: B010 - a bench's stub
        return None, None
    if mode == "off":
        return None, None
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    batch = mode == "in-memory-batch"
    provider.add_span_processor((BatchSpanProcessor if batch else SimpleSpanProcessor)(exporter))
    trace.set_tracer_provider(provider)
    return exporter, provider


async def _child(mode: str) -> dict[str, Any]:
    from mcp import Client

    from sagents.gateway._factory import open_gateway
    from sagents.gateway._settings import GatewaySettings

    exporter, provider = _set_up(mode)

    def flushed() -> None:  # a batch processor's pending exports, counted in the measurement
        if provider is not None:
            provider.force_flush()

    data = Path(tempfile.mkdtemp(prefix="sagents-bench-tracing-"))
    os.environ["SAGENTS_DATA_DIR"] = str(data / "data")
    config = data / "sagents.json"
    fleet = {"command": sys.executable, "args": ["-m", "sagents.demo.fleet_server"]}
    config.write_text(json.dumps({"mcpServers": {"fleet": fleet}}), encoding="utf-8")
    settings = GatewaySettings(config=config, mode="auto", workspace=data / "ws")
    async with (
        open_gateway(settings, wait_for_servers=True) as gateway,
        Client(gateway.server, mode="legacy") as client,
    ):
        limiter = anyio.CapacityLimiter(CONCURRENCY)

        async def one(i: int) -> None:
            async with limiter:
                result = await client.call_tool("fleet__get_device_status", {"sn": f"SN{i:04d}"})
                assert not result.is_error, result

        async def calls() -> float:
            cpu = time.process_time()
            async with anyio.create_task_group() as tg:
                for i in range(CALLS):
                    tg.start_soon(one, i)
            flushed()
            return time.process_time() - cpu

        async def script() -> float:
            cpu = time.process_time()
            ran = await client.call_tool(
                "run_script", {"code": SCRIPT, "tools": [], "description": "bench"}
            )
            assert not ran.is_error, ran
            flushed()
            return time.process_time() - cpu

        await calls()  # warm-up: connections, the session's sandbox
        await script()
        tool_cpu, script_cpu = await calls(), await script()
    spans = len(exporter.get_finished_spans()) if exporter is not None else 0
    return {"mode": mode, "tool_cpu_s": tool_cpu, "script_cpu_s": script_cpu, "spans": spans}


def _measure(mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(anyio.run(_child, sys.argv[2])))
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS
    found: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for n in range(rounds):
        order = MODES[n % len(MODES) :] + MODES[: n % len(MODES)]
        for mode in order:
            found[mode].append(_measure(mode))
    print(f"tracing overhead, gateway CPU, median of {rounds} rounds (ratio to baseline):")
    for key, what, count in (
        ("tool_cpu_s", f"MCP run_tool ({CALLS} tools/call)", CALLS),
        ("script_cpu_s", f"run_script call_many ({SCRIPT_CALLS} calls)", SCRIPT_CALLS),
    ):
        base = statistics.median(r[key] for r in found["baseline"])
        print(f"  {what}:")
        for mode in MODES:
            value = statistics.median(r[key] for r in found[mode])
            paired = [r[key] / b[key] for r, b in zip(found[mode], found["baseline"], strict=True)]
            print(
                f"    {mode:15} {value * 1e6 / count:8.1f} µs/call  {value / base:5.2f} x"
                f"  (rounds {min(paired):.2f}–{max(paired):.2f})"
            )
    for mode in ("in-memory", "in-memory-batch"):
        spans = statistics.median(r["spans"] for r in found[mode])
        print(f"  spans exported per {mode} run: {spans:.0f}")
    # What "off" adds is one check per traced point: timed alone, against a baseline call of
    # this run (the end-to-end difference of a few microseconds is below the rounds' noise).
    off_s = _off_check_s()
    for key, what, count in (
        ("tool_cpu_s", "tools/call", CALLS),
        ("script_cpu_s", "script call", SCRIPT_CALLS),
    ):
        base = statistics.median(r[key] for r in found["baseline"]) / count
        print(
            f"  off, one tool span's check alone: {off_s * 1e6:.2f} µs = "
            f"{off_s / base * 100:.2f} % of a baseline {what}"
        )


def _off_check_s() -> float:
    """CPU seconds of one ``with tool_span(...)`` when no tracer provider is set (this process
    sets none), the median of 5 batches (CPU time, as the rounds are measured)."""
    import timeit

    from sagents.core._tracing import tool_span

    def traced_point() -> None:
        with tool_span("fleet__get_device_status", arguments={}):
            pass

    batches = timeit.repeat(traced_point, number=20_000, repeat=5, timer=time.process_time)
    return statistics.median(batches) / 20_000


if __name__ == "__main__":
    main()

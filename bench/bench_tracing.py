"""The cost of OpenTelemetry tracing (docs/observability.md, "Traces") on the gateway's two
busiest paths, as ratios against a baseline measured in the same run.

The headline figures are the CPU of a gateway process of its own: four ``sagents serve``
(stdio, ``--mode auto``, the bundled fleet server as the only upstream) run side by side, each
started by this file's ``--gateway MODE`` launcher, which sets the mode's tracing up in that
process and then runs the ``sagents serve`` command itself. This process drives them with the
MCP SDK's stdio client and reads each gateway's user + system CPU from ``/proc/<pid>/stat``
(Linux; 10 ms ticks, so a few hundred calls per batch) before and after each measured batch:

- **MCP run_tool**: ``CALLS`` ``tools/call`` of ``fleet__get_device_status``, four at a time;
- **run_script call_many**: one ``run_script`` whose script makes ``SCRIPT_CALLS`` calls with
  ``call_many`` (the script's sandbox is a process of its own, not counted).

The client's own spans, the upstream's and the sandbox's CPU are not in the figures: only what
the gateway process does per call. Modes, the four gateways measured in rotated order in each
of ``ROUNDS`` rounds (each keeps running across the rounds, so a batch processor's exports land
in the batches evenly):

- ``baseline``: no tracer provider, and sagents' own tracing checks replaced by a constant
  ``False`` (what the code costs without them);
- ``off``: no tracer provider, as shipped (the default: only the checks run);
- ``in-memory``: the OpenTelemetry SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into
  an ``InMemorySpanExporter`` (every span built, ended and kept; each exported as it ends, in
  the request's path: the tests' set-up);
- ``in-memory-batch``: the same exporter behind a ``BatchSpanProcessor``, what a deployment
  configures (docs/observability.md): spans are exported by the processor's thread, whose CPU
  is the gateway process's too.

Each figure is the median over the rounds; the ratio is against ``baseline``, with the range
of the rounds' own ratios (each mode against the baseline of its round) as the noise to read it
with. Goals: ``off`` ≤ 1.05, both in-memory modes ≤ 1.20. At the end each traced gateway
reports the spans it recorded, by name: spans per call, and what a span costs (the in-memory
CPU over ``off``'s, per span). What ``off`` adds (one check per traced point) is a few
microseconds, below the rounds' noise on a loaded machine, so it is also timed alone and given
as a share of a baseline call. Not a test.

``--split`` runs two more gateways, to tell whose work the in-memory figure is:

- ``in-memory-mcp-only``: as ``in-memory``, with sagents' own tracing switched off in that
  process (the checks a constant ``False``, no attributes on the MCP SDK's server span): only the
  MCP SDK's spans, its server span of each ``tools/call`` and its client span of each upstream
  request, which it opens whenever a tracer provider is set. Its ratio is the SDK's share;
  ``in-memory`` over it is sagents' own;
- ``in-memory-cleared``: as ``in-memory``, with the exporter emptied (its public ``clear``) every
  ``CLEARED_EVERY`` spans by a span processor in the request's path: the spans freed as an
  exporter that sends them away frees them, against ``in-memory``, which keeps every span of
  the run (the garbage collector's full collections walk them all).

``--in-process`` measures the earlier way instead: each mode a child process that opens the
gateway and the MCP SDK's client in memory in one process (``time.process_time``), which also
counts the client's side of each call (and, with a tracer provider, the client's own span).

Usage: ``.venv/bin/python bench/bench_tracing.py [ROUNDS] [--split] [--in-process]`` (the
OpenTelemetry SDK is needed for the in-memory modes: ``pip install 'sagents[otel]'``, part of
the test set-up).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
MODES = ("baseline", "off", "in-memory", "in-memory-batch")
SPLIT_MODES = ("in-memory-mcp-only", "in-memory-cleared")
"""``--split``: two more gateways, to tell the MCP SDK's share from sagents' own and the garbage
collector's share of keeping every span (the module's docstring)."""
CLEARED_EVERY = 1_000
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
    if mode == "in-memory-mcp-only":
        _sagents_spans_off()
    if mode == "in-memory-cleared":
        provider.add_span_processor(_clearing(exporter))
    trace.set_tracer_provider(provider)
    return exporter, provider


def _sagents_spans_off() -> None:
    """sagents' own tracing switched off in this process, the MCP SDK's left on: no
    ``execute_tool`` span of a script's call, no ``sagents.run_script`` span, no attributes on
    the SDK's server span (a bench's stubs of sagents' own functions; the SDK's spans are
    recorded as in ``in-memory``)."""
    import sagents.core._tracing as tracing
    import sagents.gateway._server as server
    import sagents.script._dispatcher as dispatcher

    for module in (tracing, dispatcher):
        setattr(module, "tracing", lambda: False)  # noqa: B010 - a bench's stub
    setattr(server, "server_span", lambda arguments=None: None)  # noqa: B010


def _clearing(exporter: Any) -> Any:
    """A span processor, after the exporter's, that empties the in-memory exporter every
    ``CLEARED_EVERY`` spans (its public ``clear``) in the request's path, as an exporter that
    sends spans away frees them; it counts the spans' names (:data:`_CLEARED_NAMES`)."""
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    class Clearing(SpanProcessor):
        kept = 0

        def on_end(self, span: ReadableSpan) -> None:
            _CLEARED_NAMES[span.name] += 1
            self.kept += 1
            if self.kept >= CLEARED_EVERY:
                exporter.clear()
                self.kept = 0

    return Clearing()


_CLEARED_NAMES: Counter[str] = Counter()
"""The names of the spans ``in-memory-cleared`` recorded (its exporter keeps the last few)."""


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
    finished = exporter.get_finished_spans() if exporter is not None else ()
    spans = Counter(span.name for span in finished)
    return {"mode": mode, "tool_cpu_s": tool_cpu, "script_cpu_s": script_cpu, "spans": spans}


def _measure(mode: str) -> dict[str, Any]:
    """One in-process measurement (``--in-process``): a child process of its own."""
    done = subprocess.run(
        [sys.executable, str(HERE), "--child", mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def _in_process(rounds: int) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    found: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for n in range(rounds):
        for mode in MODES[n % len(MODES) :] + MODES[: n % len(MODES)]:
            found[mode].append(_measure(mode))
    # each child counted the spans of its warm-up and its measured pair
    spans = {
        mode: {name: n // 2 for name, n in runs[-1]["spans"].items()}
        for mode, runs in found.items()
        if runs[-1]["spans"]
    }
    return found, spans


def _launch_gateway(mode: str, report: Path, argv: list[str]) -> None:
    """``--gateway MODE REPORT serve ...``: the mode's tracing set up in this process, then the
    ``sagents`` command with ``argv``; at its end, the names of the spans recorded, counted,
    written to ``report`` (JSON)."""
    exporter, provider = _set_up(mode)
    from sagents.cli.main import main as sagents

    sys.argv = ["sagents", *argv]
    try:
        sagents()
    finally:
        if provider is not None and exporter is not None:
            provider.force_flush()
            names = _CLEARED_NAMES or Counter(span.name for span in exporter.get_finished_spans())
            report.write_text(json.dumps(names), encoding="utf-8")


def _gateway_pid(mode: str) -> int:
    """The child process of this one launched as the gateway of ``mode``."""
    me = os.getpid()
    for child in Path(f"/proc/{me}/task/{me}/children").read_text().split():
        argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
        if "--gateway" in argv and argv[argv.index("--gateway") + 1] == mode:
            return int(child)
    raise RuntimeError(f"no gateway process of mode {mode!r} among this process's children")


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (every thread of it) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _tools_calls(client: Any) -> None:
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(i: int) -> None:
        async with limiter:
            result = await client.call_tool("fleet__get_device_status", {"sn": f"SN{i:04d}"})
            assert not result.is_error, result

    async with anyio.create_task_group() as tg:
        for i in range(CALLS):
            tg.start_soon(one, i)


async def _script_run(client: Any) -> None:
    ran = await client.call_tool(
        "run_script", {"code": SCRIPT, "tools": [], "description": "bench"}
    )
    assert not ran.is_error, ran


async def _separate(
    rounds: int, modes: tuple[str, ...]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    """The gateways in processes of their own, driven from this one (the headline figures)."""
    from mcp import Client, StdioServerParameters

    data = Path(tempfile.mkdtemp(prefix="sagents-bench-tracing-"))
    config = data / "sagents.json"
    fleet = {"command": sys.executable, "args": ["-m", "sagents.demo.fleet_server"]}
    config.write_text(json.dumps({"mcpServers": {"fleet": fleet}}), encoding="utf-8")
    found: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    async with AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        pids: dict[str, int] = {}
        for mode in modes:
            serve = ["serve", "--config", str(config), "--mode", "auto"]
            launcher = [
                str(HERE),
                "--gateway",
                mode,
                str(data / f"{mode}.json"),
            ]
            params = StdioServerParameters(
                command=sys.executable,
                args=[*launcher, *serve],
                env={**os.environ, "SAGENTS_DATA_DIR": str(data / mode)},
                cwd=ROOT,
            )
            clients[mode] = await stack.enter_async_context(Client(params))
            pids[mode] = _gateway_pid(mode)
        for mode in modes:  # warm-up: upstream connections, the session's sandbox
            await _tools_calls(clients[mode])
            await _script_run(clients[mode])
        for n in range(rounds):
            for mode in modes[n % len(modes) :] + modes[: n % len(modes)]:
                row: dict[str, Any] = {}
                for key, batch in (("tool_cpu_s", _tools_calls), ("script_cpu_s", _script_run)):
                    cpu = _process_cpu_s(pids[mode])
                    await batch(clients[mode])
                    row[key] = _process_cpu_s(pids[mode]) - cpu
                found[mode].append(row)
    spans: dict[str, dict[str, int]] = {}
    for mode in modes:  # written by each traced gateway as it ended
        report = data / f"{mode}.json"
        if report.exists():
            counted: dict[str, int] = json.loads(report.read_text(encoding="utf-8"))
            spans[mode] = {name: round(n / (rounds + 1)) for name, n in counted.items()}
    return found, spans


def main() -> None:
    args = sys.argv[1:]
    if len(args) >= 3 and args[0] == "--gateway":
        _launch_gateway(args[1], Path(args[2]), args[3:])
        return
    if len(args) == 2 and args[0] == "--child":
        print(json.dumps(anyio.run(_child, args[1])))
        return
    in_process = "--in-process" in args
    modes = MODES + SPLIT_MODES if "--split" in args else MODES
    args = [arg for arg in args if arg not in ("--in-process", "--split")]
    rounds = int(args[0]) if args else ROUNDS
    if in_process:
        found, spans = _in_process(rounds)
        where = "gateway and client in one process, CPU of that process"
    else:
        found, spans = anyio.run(_separate, rounds, modes)
        where = "gateway process CPU (/proc), its client in this process"
    print(f"tracing overhead, {where}, median of {rounds} rounds (ratio to baseline):")
    for key, what, count in (
        ("tool_cpu_s", f"MCP run_tool ({CALLS} tools/call)", CALLS),
        ("script_cpu_s", f"run_script call_many ({SCRIPT_CALLS} calls)", SCRIPT_CALLS),
    ):
        base = statistics.median(r[key] for r in found["baseline"])
        print(f"  {what}:")
        for mode in found:
            value = statistics.median(r[key] for r in found[mode])
            paired = [r[key] / b[key] for r, b in zip(found[mode], found["baseline"], strict=True)]
            print(
                f"    {mode:18} {value * 1e6 / count:8.1f} µs/call  {value / base:5.2f} x"
                f"  (rounds {min(paired):.2f}–{max(paired):.2f})"
            )
    if "in-memory-mcp-only" in found:  # the MCP SDK's spans alone, and sagents' on top of them
        for key, what in (("tool_cpu_s", "tools/call"), ("script_cpu_s", "script call")):
            base, mcp, full, cleared = (
                statistics.median(r[key] for r in found[mode])
                for mode in ("baseline", "in-memory-mcp-only", "in-memory", "in-memory-cleared")
            )
            print(
                f"  {what}: the MCP SDK's spans alone {mcp / base:.2f} x the baseline; sagents' "
                f"own on top {full / mcp:.2f} x ({(full - mcp) / (full - base) * 100:.0f} % of "
                f"in-memory's extra); spans freed every {CLEARED_EVERY} "
                f"{cleared / base:.2f} x (kept: {full / base:.2f} x)"
            )
    # Spans per batch pair (CALLS tools/call and one script of SCRIPT_CALLS calls), and what
    # one costs: the mode's CPU over off's for the pair, per span.
    off = sum(
        statistics.median(r[key] for r in found["off"]) for key in ("tool_cpu_s", "script_cpu_s")
    )
    for mode, names in spans.items():
        total = sum(names.values())
        cpu = sum(
            statistics.median(r[key] for r in found[mode]) for key in ("tool_cpu_s", "script_cpu_s")
        )
        print(
            f"  {mode}: {total} spans per {CALLS} tools/call + one {SCRIPT_CALLS}-call script, "
            f"{(cpu - off) / total * 1e6:.1f} µs of gateway CPU per span over off; by name: "
            + ", ".join(
                f"{name} {n}" for name, n in sorted(names.items(), key=lambda kv: -kv[1]) if n
            )
        )
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
    # What a span costs the OpenTelemetry SDK alone, to set beside the spans per call above:
    # the rest of a traced call's extra CPU is not in the SDK's own frames.
    for mode, batch in (("in-memory", False), ("in-memory-batch", True)):
        alone = _span_alone_s(batch)
        print(f"  {mode}, one SDK span alone (this process): {alone * 1e6:.1f} µs")


def _span_alone_s(batch: bool) -> float:
    """CPU seconds of one span of the OpenTelemetry SDK alone (a server span with the MCP SDK's
    attributes, started as current and ended) into an in-memory exporter, through a
    ``BatchSpanProcessor`` (its thread's CPU counted too) or a ``SimpleSpanProcessor``; the
    median of 5 batches. The provider is not set globally: this process stays untraced."""
    import timeit

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor((BatchSpanProcessor if batch else SimpleSpanProcessor)(exporter))
    tracer = provider.get_tracer("bench")
    attributes = {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": "2025-11-25",
        "jsonrpc.request.id": "7",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "fleet__get_device_status",
    }

    def one() -> None:
        with tracer.start_as_current_span(
            "tools/call fleet__get_device_status", kind=SpanKind.SERVER, attributes=attributes
        ):
            pass

    def flushed() -> None:
        for _ in range(2_000):
            one()
        provider.force_flush()
        exporter.clear()

    batches = timeit.repeat(flushed, number=1, repeat=5, timer=time.process_time)
    provider.shutdown()
    return statistics.median(batches) / 2_000


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

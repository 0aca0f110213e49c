"""Benchmark: tool_progress emits per second through the channel, coalescing on and off.

Run: ``.venv/bin/python bench/bench_progress.py [--emits N]``

A bound tool call emits N short lines (yielding to the loop every 100 emits, as a tool reading a
pipe would), while a consumer drains its queue. The baseline is the same run with coalescing
off (``flush_interval_s=0``, every emit becomes an event); the figure that matters is the
ratio. A third run ("stalled", coalescing off) has a consumer that reads nothing until the tool
ends: the tool must not slow down (the overflow policy merges or drops progress instead).
A last figure is a consumer's registration (register and unregister a queue) on a hub where
``--sessions`` other sessions have a consumer, against the same on a hub with none: a gateway's
run registers its queues while hundreds of sessions listen.
Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import time

import anyio
import anyio.lowlevel

from sagents.progress import (
    EventQueue,
    ProgressHub,
    ProgressSettings,
    bind_tool_call,
    emit_tool_progress,
)

LINE = "progress line 0123456789\n"  # 25 bytes


async def run_once(
    interval_s: float, emits: int, *, stalled: bool = False
) -> tuple[float, int, int, int]:
    """Return (seconds, events received, characters received, events dropped).

    With ``stalled`` the consumer reads nothing until the tool has ended.
    """
    hub = ProgressHub(settings=ProgressSettings(flush_interval_s=interval_s))
    received = [0, 0]
    async with hub.subscribe("bench") as events:

        async def consume() -> None:
            async for event in events:
                received[0] += 1
                received[1] += len(event.to_dict().get("text", ""))

        async with anyio.create_task_group() as tg:
            if not stalled:
                tg.start_soon(consume)
            start = time.perf_counter()
            async with bind_tool_call(hub, "bench", "call_bench"):
                for n in range(emits):
                    await emit_tool_progress(LINE)
                    if n % 100 == 99:
                        await anyio.lowlevel.checkpoint()
            elapsed = time.perf_counter() - start
            if stalled:
                tg.start_soon(consume)
            hub.unregister_progress_queue("bench", events)
    return elapsed, received[0], received[1], events.stats.dropped_events


def registration_us(listening: int, registrations: int = 2000) -> float:
    """CPU µs of one register + unregister on a hub where ``listening`` sessions have a queue."""
    hub = ProgressHub()
    for number in range(listening):
        hub.register_progress_queue(f"listening-{number}", EventQueue())
    start = time.process_time()
    for _ in range(registrations):
        queue = EventQueue()
        hub.register_progress_queue("bench", queue)
        hub.unregister_progress_queue("bench", queue)
    return (time.process_time() - start) / registrations * 1e6


async def main(emits: int, rounds: int, sessions: int) -> None:
    results: dict[str, list[tuple[float, int, int, int]]] = {"off": [], "on": [], "stalled": []}
    for _ in range(rounds):
        results["off"].append(await run_once(0.0, emits))
        results["on"].append(await run_once(0.05, emits))
        results["stalled"].append(await run_once(0.0, emits, stalled=True))
    best = {name: min(runs) for name, runs in results.items()}
    for name, (seconds, count, size, dropped) in best.items():
        print(
            f"coalescing {name:>7}: {emits / seconds:>12,.0f} emits/s  "
            f"{count:>8,} events  {size:>10,} chars delivered  {dropped} dropped"
        )
    off, on = best["off"], best["on"]
    print(f"ratio on/off emits per second: {off[0] / on[0]:.2f}x")
    print(f"ratio off/on events delivered: {off[1] / on[1]:.1f}x fewer events with coalescing")
    stalled = best["stalled"]
    print(f"ratio stalled/live consumer emits per second (off): {off[0] / stalled[0]:.2f}x")
    alone = min(registration_us(0) for _ in range(rounds))
    crowded = min(registration_us(sessions) for _ in range(rounds))
    print(
        f"registration: {alone:.1f} µs alone, {crowded:.1f} µs with {sessions} sessions "
        f"listening: ratio {crowded / alone:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emits", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=500)
    args = parser.parse_args()
    anyio.run(main, args.emits, args.rounds, args.sessions)

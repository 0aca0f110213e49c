"""The console's live events with many open pages: an event serialised once for every page
against once per page (how the console sent them before), in the same run.

EVENTS progress events (``script.progress`` and ``tool_progress``, as a run_script run emits
them) go through :class:`~sagents.gateway.console._live.LiveRuns` (the hub's watcher) to
WATCHERS open pages, each a task that reads its stream as the console's ``/console/events``
endpoint does (visibility and page filters, then what it writes):

- ``per page``: each page serialises each event itself and writes it alone (the former
  endpoint);
- ``once``: each page writes the frame :class:`~sagents.gateway.console._live.LiveUpdate`
  carries, serialised once per event, and what arrived meanwhile in one write (the endpoint
  now, :func:`sagents.gateway.console._app.page_frames`);
- ``once, unbatched``: the frame serialised once, but each event written alone (the share
  of serialising once, without the batching);
- ``no page``: the same events with no page open: the work the events cost anyway.

Reported: CPU per event (``time.process_time``) of each, best of ROUNDS alternating rounds,
and the ratio per page / once. Writes go to a counter, not a socket: the transport's cost per
write is the same for both, and fewer writes only favour ``once``.

With ``--serve``, the same question end to end, as an operator sees it: a real ``sagents serve
--transport http`` (tests/gateway/serve_probe.py) runs RUNS run_script calls whose scripts
print SERVE_LINES lines each (every chunk of output is a ``tool_progress`` event for the
console), with no console page open and with WATCHERS ``/console/events`` streams of the
operator open (at most ``MAX_STREAMS_PER_PRINCIPAL``, the console's cap per principal; read by
this process); reported: the serve process's CPU (``/proc/PID/stat``) for the workload,
best of ROUNDS alternating rounds, and the ratio with pages / without. Run it on two checkouts
for before / after.

Run: ``.venv/bin/python bench/bench_console_watchers.py [--watchers 100] [--events 2000]
[--serve]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx2 as httpx
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import Client

from sagents.core.events import ScriptProgressEvent, ToolProgressEvent
from sagents.gateway.console._app import page_frames
from sagents.gateway.console._live import MAX_STREAMS_PER_PRINCIPAL, LiveRuns, LiveUpdate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.gateway.serve_probe import Serve, http_serve

ROUNDS = 5
SERVE_ROUNDS = 3
RUNS = 10  # run_script calls per measured workload (--serve)
SERVE_LINES = 100  # lines each script prints, one flushed chunk each


def _events(count: int) -> list[ToolProgressEvent | ScriptProgressEvent]:
    """A run's events: mostly tool output lines, a script.progress every tenth."""
    made: list[ToolProgressEvent | ScriptProgressEvent] = []
    for index in range(count):
        if index % 10 == 0:
            made.append(
                ScriptProgressEvent(
                    script_id="run-1",
                    tool_call_id="call-1",
                    calls=index,
                    done=index,
                    total=count,
                    ts=time.time(),
                )
            )
        else:
            made.append(
                ToolProgressEvent(
                    tool_call_id="call-2", text=f"line {index} of the output\n", ts=time.time()
                )
            )
    return made


def _visible(session_id: str) -> bool:
    return bool(session_id)  # the operator sees every session


def _wanted(event: dict[str, Any]) -> bool:
    return event.get("type") != "tool_progress" or event.get("tool_call_id") == "call-2"


async def _page_per_event(updates: MemoryObjectReceiveStream[LiveUpdate], sent: list[int]) -> None:
    """The former endpoint: each event serialised by each page and written alone."""
    async for update in updates:
        sent[1] += 1
        if not _visible(update.session_id) or not _wanted(update.event):
            continue
        frame = f"data: {json.dumps(update.event, ensure_ascii=False, default=str)}\n\n".encode()
        sent[0] += len(frame)


async def _page_once(updates: MemoryObjectReceiveStream[LiveUpdate], sent: list[int]) -> None:
    """The endpoint now: the frame serialised once, what waits sent in one write."""
    async for first in updates:
        batch = [first]
        while True:
            try:
                batch.append(updates.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        sent[1] += len(batch)
        frames = page_frames(batch, lambda u: _visible(u.session_id) and _wanted(u.event))
        sent[0] += len(frames)


async def _page_once_unbatched(
    updates: MemoryObjectReceiveStream[LiveUpdate], sent: list[int]
) -> None:
    """The frame serialised once, but each event written alone: the serialisation's share."""
    async for update in updates:
        sent[1] += 1
        sent[0] += len(page_frames([update], lambda u: _visible(u.session_id) and _wanted(u.event)))


_PAGES = {"per page": _page_per_event, "once": _page_once, "once, unbatched": _page_once_unbatched}


async def _round(style: str, watchers: int, events: list[Any]) -> float:
    """CPU seconds per event for one style."""
    live = LiveRuns()
    sent = [0, 0]  # bytes written, updates read (by every page)
    page = _PAGES.get(style, _page_once)
    async with anyio.create_task_group() as tg:
        ready: list[Any] = []
        for index in range(watchers if style != "no page" else 0):
            # run pages that show every event; one principal each (each has a cap of pages)
            context = live.subscribe(principal=f"principal-{index}", output_of="call-2")
            updates = await context.__aenter__()
            ready.append(context)
            tg.start_soon(page, updates, sent)
        pages = len(ready)
        started = time.process_time()
        for index, event in enumerate(events):
            live.offer("session-1", event)
            if index % 50 == 49 or index == len(events) - 1:
                # the pages read what was offered (nothing is dropped for a slow page)
                while sent[1] < (index + 1) * pages:
                    await anyio.lowlevel.checkpoint()
        took = time.process_time() - started
        tg.cancel_scope.cancel()
    for context in ready:
        await context.__aexit__(None, None, None)
    return took / len(events)


async def main(watchers: int, count: int, as_json: bool) -> None:
    events = _events(count)
    best: dict[str, float] = {}
    styles = ["no page", "per page", "once", "once, unbatched"]
    for index in range(ROUNDS):
        for style in styles[index % 4 :] + styles[: index % 4]:
            took = await _round(style, watchers, events)
            best[style] = min(best.get(style, took), took)
    ratio = best["per page"] / best["once"]
    for style in styles:
        print(f"{style:<16} {best[style] * 1e6:9.1f} us CPU per event ({watchers} pages)")
    print(f"per page / once: {ratio:.2f}x")
    print(f"per page / once, unbatched: {best['per page'] / best['once, unbatched']:.2f}x")
    per_page_extra = (best["per page"] - best["no page"]) / watchers * 1e6
    once_extra = (best["once"] - best["no page"]) / watchers * 1e6
    print(f"per event and page: {per_page_extra:.2f} us (per page), {once_extra:.2f} us (once)")
    if as_json:
        print(json.dumps({**{k: v * 1e6 for k, v in best.items()}, "ratio": ratio}))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _workload(url: str) -> None:
    code = (
        "import time\n"
        f"for i in range({SERVE_LINES}):\n"
        "    print('line', i, flush=True)\n"
        "    time.sleep(0.002)\n"
    )
    async with Client(url, mode="legacy") as client:
        for _ in range(RUNS):
            arguments = {"code": code, "tools": [], "description": "prints"}
            ran = await client.call_tool("run_script", arguments)
            assert not ran.is_error, ran


async def _watch(base: str, http: httpx.AsyncClient, ready: anyio.Event, count: list[int]) -> None:
    async with http.stream("GET", f"{base}/console/events") as events:
        async for chunk in events.aiter_bytes():
            count[0] += chunk.count(b"data:")
            if count[0]:
                ready.set()


async def _serve_round(serve: Serve, watchers: int) -> float:
    base = serve.url.removesuffix("/mcp")
    limits = httpx.Limits(max_connections=watchers + 1)
    async with (
        httpx.AsyncClient(timeout=None, limits=limits) as http,
        anyio.create_task_group() as tg,
    ):
        login = next(line for line in serve.log if "console at " in line).split("console at ")[1]
        await http.get(login.strip())  # the operator's login URL serve prints: its cookie
        for _ in range(watchers):
            ready = anyio.Event()
            tg.start_soon(_watch, base, http, ready, [0])
            with anyio.fail_after(30):
                await ready.wait()  # its first event: the page is open
        before = _cpu_seconds(serve.pid)
        await _workload(serve.url)
        took = _cpu_seconds(serve.pid) - before
        tg.cancel_scope.cancel()
    return took


async def serve_main(watchers: int, as_json: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with http_serve(Path(tmp)) as serve:
            await _workload(serve.url)  # warm-up
            best = {0: float("inf"), watchers: float("inf")}
            for index in range(SERVE_ROUNDS):
                for pages in (0, watchers) if index % 2 == 0 else (watchers, 0):
                    best[pages] = min(best[pages], await _serve_round(serve, pages))
    ratio = best[watchers] / best[0]
    print(
        f"sagents serve CPU for {RUNS} runs x {SERVE_LINES} lines: no page {best[0]:.2f} s, "
        f"{watchers} pages {best[watchers]:.2f} s, ratio {ratio:.2f}x"
    )
    if as_json:
        print(json.dumps({"no_page_s": best[0], "pages_s": best[watchers], "ratio": ratio}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help="end to end, sagents serve")
    args = parser.parse_args()
    if args.serve:
        # one operator opens them: at most MAX_STREAMS_PER_PRINCIPAL pages
        anyio.run(serve_main, min(args.watchers, MAX_STREAMS_PER_PRINCIPAL), args.json)
    else:
        anyio.run(main, args.watchers, args.events, args.json)

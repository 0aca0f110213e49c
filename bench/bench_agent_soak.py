"""What a long-running agent process keeps after many runs: SAgent and the AG-UI route.

Run: ``.venv/bin/python bench/bench_agent_soak.py [--runs 1000] [--api chat] [--whole]
[--trace] [--ag-ui]``

One process, one scripted model server (``sagents.testing.ScriptedModel``, on 127.0.0.1, read
through the adapter's official SDK). Each run is a tool turn (the model calls a local tool, then
answers), each in a session of its own (a new ``session_id`` per run, so that the agent's
``max_sessions`` bound is what keeps the sessions' memory in check). With ``--ag-ui`` each run is
instead one ``POST /ag-ui`` of a new thread to the AG-UI route served on 127.0.0.1 (the chat's
``threads.sqlite3`` in a temporary data directory), read back through ``httpx``.

After a warm-up of WARMUP runs the process is measured (``/proc/self/fd``, ``threading``,
``asyncio.all_tasks()``, VmRSS, and with ``--trace`` tracemalloc's traced bytes), then after
each of two rounds of RUNS runs; printed: the three measurements and the growth per run of
each round. The baseline is the same process after its warm-up. What is bounded grows in the
first round at most (the agent keeps MAX_SESSIONS sessions, the AG-UI route 1000 threads in
memory, ``MAX_THREADS_IN_MEMORY``) and not in the second; a leak grows in both (not a test; the
figures are this machine's).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import sys
import tempfile
import threading
import tracemalloc
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sagents.agent import DoneEvent, SAgent  # noqa: E402
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call  # noqa: E402
from sagents.tool import SessionContext, ToolManager, tool  # noqa: E402
from tests.agent.ag_ui_helpers import TOKEN, run_input, serve_route  # noqa: E402

WARMUP = 100  # runs before the baseline (the SDKs' and the loop's caches fill)
MAX_SESSIONS = 64  # the agent's bound, small so that many runs pass it


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class Script:
    """Odd requests get a tool call, even ones its answer (the runs are sequential)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        self.count += 1
        return tool_call("lookup", {"key": "k"}) if self.count % 2 else reply("done")


@dataclass(frozen=True)
class Usage:
    fds: int
    threads: int
    tasks: int
    rss_kib: int
    traced: int

    @classmethod
    def now(cls) -> Usage:
        gc.collect()
        with open("/proc/self/status", encoding="ascii") as status:
            rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
        return cls(
            fds=len(os.listdir("/proc/self/fd")),
            threads=threading.active_count(),
            tasks=len(asyncio.all_tasks()),
            rss_kib=rss,
            traced=tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0,
        )


async def _soak(label: str, one: Callable[[int], Awaitable[None]], runs: int) -> None:
    """WARMUP runs, then two rounds of ``runs``, measured before and after each; printed."""
    for number in range(WARMUP):
        await one(number)
    marks = [Usage.now()]
    for start in (WARMUP, WARMUP + runs):
        for number in range(start, start + runs):
            await one(number)
        marks.append(Usage.now())
    print(f"{label}: two rounds of {runs} runs after a warm-up of {WARMUP}")
    for name in ("fds", "threads", "tasks"):
        print(f"  {name:8} " + " -> ".join(f"{getattr(mark, name):>8}" for mark in marks))
    for name, scale in (("rss_kib", 1024), ("traced", 1)):
        if not any(getattr(mark, name) for mark in marks):
            continue
        grown = [
            (getattr(after, name) - getattr(before, name)) * scale / runs
            for before, after in itertools.pairwise(marks)
        ]
        shown = " -> ".join(f"{getattr(mark, name):>8}" for mark in marks)
        print(
            f"  {name:8} {shown}   (B per run: " + ", then ".join(f"{g:+.0f}" for g in grown) + ")"
        )


async def soak_agent(runs: int, api: str, stream: bool) -> None:
    manager = ToolManager()
    manager.register_tool(tool(permission="read_only")(lookup))
    async with ScriptedModel(Script(), api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(stream=stream), run_script=False, max_sessions=MAX_SESSIONS
        )

        async def one(number: int) -> None:
            context = SessionContext(session_id=f"soak-{number}")
            messages = [{"role": "user", "content": "go"}]
            last = None
            async with aclosing(
                agent.run_stream(messages, tool_manager=manager, session_context=context)
            ) as events:
                async for event in events:
                    last = event
            assert isinstance(last, DoneEvent), last
            assert last.reason == "stop", last.to_dict()
            if number % 100 == 0:
                server.requests.clear()  # the server's record, not the agent's

        await _soak(f"SAgent on {api} ({'streamed' if stream else 'whole'})", one, runs)


async def soak_ag_ui(runs: int) -> None:
    manager = ToolManager()
    manager.register_tool(tool(permission="read_only")(lookup))
    with tempfile.TemporaryDirectory() as data:
        async with ScriptedModel(Script()) as server:
            agent = SAgent(model=server.chat_model(), run_script=False, max_sessions=MAX_SESSIONS)
            async with (
                serve_route(agent, Path(data), manager) as url,
                httpx.AsyncClient(timeout=60) as client,
            ):

                async def one(number: int) -> None:
                    body = run_input(
                        f"soak-{number}", [{"id": f"m{number}", "role": "user", "content": "go"}]
                    )
                    headers = {"Authorization": f"Bearer {TOKEN}"}
                    response = await client.post(url, json=body, headers=headers)
                    assert response.status_code == 200, response.text
                    assert "RUN_FINISHED" in response.text, response.text
                    if number % 100 == 0:
                        server.requests.clear()

                await _soak("AG-UI route (one new thread per run)", one, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument(
        "--api", default="chat", choices=["chat", "responses", "anthropic", "gemini"]
    )
    parser.add_argument("--whole", action="store_true", help="whole answers, not streamed")
    parser.add_argument("--trace", action="store_true", help="tracemalloc (slower)")
    parser.add_argument("--ag-ui", action="store_true", help="the AG-UI route instead")
    args = parser.parse_args()
    if args.trace:
        tracemalloc.start(1)
    if args.ag_ui:
        anyio.run(soak_ag_ui, args.runs)
    else:
        anyio.run(soak_agent, args.runs, args.api, not args.whole)


if __name__ == "__main__":
    main()

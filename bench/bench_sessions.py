"""What each client session leaves behind in ``sagents serve --transport http``.

A real ``sagents serve`` (one stdio upstream, so that ``run_script`` is offered) serves SESSIONS
short sequential sessions (the MCP SDK's streamable-HTTP client, handshake era: list the
tools, call one, run one script, disconnect with ``DELETE``). After a warm-up session the
serve process tree is measured (``/proc``: the serve process's descriptors and RSS, its
descendant processes, the sandbox cgroups they are in, the whole tree's RSS), and again every
STEP sessions (each time once the sandbox processes of ended sessions have exited, waiting
at most SETTLE_S seconds, inside one probe session); the growth per session is
(now - after warm-up) / sessions. The baseline is the
tree after the warm-up session of the same run.

Then IDLE_SESSIONS more sessions drop their connection without ``DELETE`` (a client that
crashed or went away); the gateway's ``sessionIdleTimeout`` is set to IDLE_S seconds, and the
tree is measured once the idle sessions should have expired (waiting up to 10 x IDLE_S for the
sandbox processes to exit).

Run: ``.venv/bin/python bench/bench_sessions.py [--sessions 500] [--step 100] [--idle 2]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.gateway.serve_probe import Serve, TreeUsage, http_serve, short_session  # noqa: E402

IDLE_SESSIONS = 20  # sessions that end without DELETE, for the idle phase
SETTLE_S = 10.0  # seconds a measurement waits for the sandbox processes of ended sessions
MIB = 1024 * 1024


async def _measure(serve: Serve, wait_s: float) -> TreeUsage:
    """The tree once its sandbox processes have exited (at most ``wait_s`` seconds: a gateway
    that keeps them is measured as it is then)."""
    try:
        return await serve.settled_usage(wait_s=wait_s)
    except TimeoutError:
        return serve.usage()


def _growth(now: TreeUsage, base: TreeUsage, sessions: int) -> dict[str, float]:
    """Growth per session of each measure between ``base`` and ``now``."""
    return {
        "fds": (now.fds - base.fds) / sessions,
        "processes": (now.processes - base.processes) / sessions,
        "cgroups": (now.cgroups - base.cgroups) / sessions,
        "serve_rss_kib": (now.rss_bytes - base.rss_bytes) / sessions / 1024,
        "tree_rss_kib": (now.tree_rss_bytes - base.tree_rss_bytes) / sessions / 1024,
    }


def _row(label: str, usage: TreeUsage, growth: dict[str, float] | None) -> str:
    shown = (
        f"{label:<28} fds {usage.fds:>5}  processes {usage.processes:>4}  "
        f"cgroups {usage.cgroups:>4}  serve RSS {usage.rss_bytes / MIB:7.1f} MiB  "
        f"tree RSS {usage.tree_rss_bytes / MIB:8.1f} MiB"
    )
    if growth is not None:
        shown += (
            f"\n{'':<28} per session: fds {growth['fds']:+.3f}  processes "
            f"{growth['processes']:+.3f}  cgroups {growth['cgroups']:+.3f}  serve RSS "
            f"{growth['serve_rss_kib']:+.1f} KiB  tree RSS {growth['tree_rss_kib']:+.1f} KiB"
        )
    return shown


async def main(sessions: int, step: int, idle_s: float, as_json: bool) -> None:
    results: dict[str, object] = {"sessions": sessions, "idle_s": idle_s}
    with tempfile.TemporaryDirectory() as tmp:
        async with http_serve(Path(tmp), {"sessionIdleTimeout": idle_s}) as serve:
            await short_session(serve.url)  # warm-up: the upstream, the runtime, caches
            base = await _measure(serve, SETTLE_S)
            print(_row("after warm-up session", base, None), flush=True)
            started = time.perf_counter()
            for done in range(1, sessions + 1):
                await short_session(serve.url)
                if done % step == 0 or done == sessions:
                    now = await _measure(serve, SETTLE_S)
                    growth = _growth(now, base, done)
                    print(_row(f"after {done} sessions", now, growth), flush=True)
            took = time.perf_counter() - started
            results["with_delete"] = growth
            results["seconds_per_session"] = took / sessions
            print(f"{took / sessions * 1000:.0f} ms per session", flush=True)

            before_idle = now  # the last measurement, settled
            for _ in range(IDLE_SESSIONS):
                await short_session(serve.url, delete=False)
            dropped = serve.usage()
            print(_row(f"{IDLE_SESSIONS} sessions without DELETE", dropped, None), flush=True)
            after = await _measure(serve, idle_s * 10)
            growth = _growth(after, before_idle, IDLE_SESSIONS)
            results["after_idle"] = growth
            print(_row(f"after idle expiry ({idle_s:g} s)", after, growth), flush=True)
            crashed = [line for line in serve.log if "Traceback" in line]
            results["tracebacks_in_log"] = len(crashed)
    if as_json:
        print(json.dumps(results))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--step", type=int, default=100)
    parser.add_argument("--idle", type=float, default=2.0, help="sessionIdleTimeout, seconds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    anyio.run(main, args.sessions, args.step, args.idle, args.json)

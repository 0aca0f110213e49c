"""Launch overhead of the bubblewrap sandbox against a bare process launch
(docs/sandbox.md, "Costs").

Runs ``true`` and ``python -c pass`` N times each: bare (``subprocess.run``, the baseline),
through the ``passthrough`` provider (our launch path without isolation: cgroup, rlimits,
pipes), and through the ``local`` provider (bubblewrap). Prints milliseconds per launch and the
ratio to the bare launch measured in the same run. Not a test.

Usage: .venv/bin/python bench/bench_sandbox.py [N]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

import anyio

from sagents.sandbox import Sandbox, SandboxParams, create_sandbox
from sagents.sandbox._bwrap import python_runtime


def _bare(argv: list[str], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run(argv, check=True, capture_output=True)
    return (time.perf_counter() - start) / n


async def _through(sandbox: Sandbox, argv: list[str], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        done = await sandbox.run(argv)
        if done.exit_code != 0:
            raise SystemExit(f"{argv!r} failed in the sandbox: {done!r}")
    return (time.perf_counter() - start) / n


async def main(n: int) -> None:
    python = python_runtime()[1]
    programs = {"true": ["true"], "python -c pass": [python, "-c", "pass"]}
    with tempfile.TemporaryDirectory() as workspace:
        params = SandboxParams(workspace=workspace)
        async with (
            create_sandbox("local", params) as local,
            create_sandbox("passthrough", params) as passthrough,
        ):
            info = local.describe()
            print(f"bubblewrap sandbox, cgroups={info.cgroups}, {n} launches each")
            print(f"{'program':<16}{'launch':<14}{'ms/launch':>10}{'ratio':>8}")
            for label, argv in programs.items():
                await _through(local, argv, 2)  # warm up caches
                base = _bare(argv, n)
                runs: dict[str, Callable[[], Awaitable[float]]] = {
                    "passthrough": lambda argv=argv: _through(passthrough, argv, n),
                    "bwrap": lambda argv=argv: _through(local, argv, n),
                }
                print(f"{label:<16}{'bare':<14}{base * 1000:>10.2f}{1.0:>8.2f}")
                for name, run in runs.items():
                    took = await run()
                    print(f"{label:<16}{name:<14}{took * 1000:>10.2f}{took / base:>8.2f}")


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 50)

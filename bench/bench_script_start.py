"""Start-up cost of an empty run_script, by interpreter options, against ``python -c pass``.

An empty script (``pass``) runs through the whole run_script path (``ScriptRunner``,
``SandboxLauncher``, bubblewrap, bootstrap, records, teardown) with the guest started two ways,
interleaved in one run: ``-I`` only (``site`` runs, and with it every ``.pth`` file of the
interpreter) and the current options (``-I -S``: no ``site``; the bootstrap adds
``site-packages`` itself). The baseline is a bare ``python -c pass`` of the same interpreter,
measured in the same rounds (and, for reference, a bare ``python -I -S -c pass``). Prints
medians in milliseconds and ratios to the baseline. Not a test.

Usage: ``.venv/bin/python bench/bench_script_start.py [ROUNDS]``
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from sagents.core.result import ToolResult
from sagents.sandbox import LocalSandbox, SandboxParams
from sagents.sandbox.bwrap import python_runtime
from sagents.script import runtime as script_runtime
from sagents.script.runner import ScriptRunner
from sagents.script.runtime import install_runtime
from sagents.script.sandbox_launcher import SandboxLauncher
from sagents.script.values import ScriptRequest

OPTIONS = {
    "-I (site and .pth run)": ("-I", "-X", "utf8"),
    "-I -S (current)": script_runtime.GUEST_FLAGS,
}


async def _no_tools(name: str, arguments: dict[str, Any]) -> ToolResult:
    return ToolResult.from_error("unknown_tool", f"no tool {name!r}")


async def main(rounds: int) -> None:
    python = python_runtime()[1]
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as workspace:
        runner = ScriptRunner(
            specs=[],
            call_tool=_no_tools,
            workspace=Path(workspace),
            runtime=install_runtime(Path(data)),
            launcher=SandboxLauncher(LocalSandbox(SandboxParams(workspace=workspace))),
            mode="auto",
        )

        async def empty_run(flags: tuple[str, ...]) -> float:
            script_runtime.GUEST_FLAGS = flags  # read by bootstrap_argv at each launch
            started = time.perf_counter()
            result = await runner.run(ScriptRequest(code="pass\n", description="empty"))
            took = time.perf_counter() - started
            if result.status != "ok":
                raise SystemExit(f"the empty run failed: {result.output}")
            return took

        def bare(*flags: str) -> float:
            started = time.perf_counter()
            subprocess.run([python, *flags, "-c", "pass"], check=True)
            return time.perf_counter() - started

        for flags in OPTIONS.values():
            await empty_run(flags)  # warm up
        times: dict[str, list[float]] = {"python -c pass (bare)": [], "python -I -S -c pass": []}
        times.update({label: [] for label in OPTIONS})
        for _ in range(rounds):
            times["python -c pass (bare)"].append(bare())
            times["python -I -S -c pass"].append(bare("-I", "-S"))
            for label, flags in OPTIONS.items():
                times[label].append(await empty_run(flags))
    base = statistics.median(times["python -c pass (bare)"])
    print(f"empty run_script through bubblewrap, median of {rounds} interleaved rounds")
    print(f"{'guest start':<28}{'ms':>8}{'ratio':>8}{'over bare ms':>14}")
    for label, samples in times.items():
        median = statistics.median(samples)
        print(
            f"{label:<28}{median * 1000:>8.1f}{median / base:>8.2f}{(median - base) * 1000:>14.1f}"
        )


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20)

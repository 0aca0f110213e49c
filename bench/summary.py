"""Run the benchmarks and print the performance table (figures as min / median of N runs).

Run: ``.venv/bin/python bench/summary.py [--runs N] [--only NAME ...]``.

Each row of the table names a path, the benchmark that measures it, its goal, and a function
that runs the benchmark once (a child process with ``--json``) and returns that run's figure
(a ratio, or a difference in seconds). The summary runs each measured row ``--runs`` times
(default 3) and prints the minimum and the median of the figures. A row whose benchmark has no
``--json`` output yet is printed as "not measured", with the command that measures it by hand:
to add it, give that benchmark a ``--json`` mode and the row a ``measure`` function.
Not a test: nothing is asserted; ratios matter, not absolute values.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True, kw_only=True)
class Row:
    """One line of the table.

    Attributes:
        name: The path measured (the words of the performance issue's table).
        bench: The benchmark's file in ``bench/``.
        goal: The goal, in words.
        measure: Runs the benchmark once and returns the figures of that run, by label; None
            while the benchmark has no ``--json`` mode.
    """

    name: str
    bench: str
    goal: str
    measure: Callable[[], dict[str, float]] | None = None


def _run_json(script: str, *args: str) -> Any:
    completed = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _tool_dispatch() -> dict[str, float]:
    report = _run_json("bench_tool_dispatch.py", "--peers-only", "--rounds", "1")["peers"]
    figures = {"sagents us/call": report["sagents run_tool"]}
    for name, peer in report["peers"].items():
        figures[f"/ {name}"] = peer["ratio"]
    return figures


def _cli_start() -> dict[str, float]:
    report = _run_json("bench_cli_start.py", "--runs", "5")
    row = report["sagents --help"]
    return {
        "wall - python (ms)": row["minus_python_s"] * 1e3,
        "CPU - python (ms)": row["cpu_minus_python_s"] * 1e3,
        "CPU / python": row["cpu_ratio"],
    }


def _mcp() -> dict[str, float]:
    report = _run_json("bench_mcp.py", "900", "--stdio-only")
    return {
        f"{case} {label}": value
        for case, paths in report.items()
        for label, value in paths.items()
        if label.startswith("run_tool")
    }


def _serve_proxy() -> dict[str, float]:
    report = _run_json("bench_serve_proxy.py", "150")
    return {label: value for label, value in report.items() if label.endswith(" ratio")}


def _run_script() -> dict[str, float]:
    report = _run_json("bench_run_script.py")
    return {label: float(value) for label, value in report.items()}


def _script_start() -> dict[str, float]:
    report = _run_json("bench_script_start.py", "5")
    return {label: float(value) for label, value in report.items()}


def _suggest_cost() -> dict[str, float]:
    report = _run_json("bench_suggest.py", "--only", "cost")["cost"]
    return {"ms/query": report["per_query_ms"], "/ serialising the schemas": report["ratio"]}


def _suggest_recall() -> dict[str, float]:
    report = _run_json("bench_suggest.py", "--only", "recall")["bfcl"]["recall_fused"]
    return {"R@5": report["5"], "R@10": report["10"]}


ROWS: tuple[Row, ...] = (
    Row(
        name="run_script call_many (500 calls of a 5 ms tool, concurrency 4) vs the SDK client",
        bench="bench_run_script.py",
        goal=">= 0.95, loaded and quiet",
        measure=_run_script,
    ),
    Row(
        name="ToolManager.run_tool on an MCP echo tool (stdio) vs the SDK client: calls/s ratio,"
        " and host CPU per call / the SDK client's",
        bench="bench_mcp.py",
        goal=">= 0.95; CPU <= 1.2 x",
        measure=_mcp,
    ),
    Row(
        name="run_tool on a trivial local tool vs pydantic-ai FunctionToolset",
        bench="bench_tool_dispatch.py",
        goal="<= 2 x pydantic-ai, same run",
        measure=_tool_dispatch,
    ),
    Row(
        name="sagents serve (stdio) in front of an echo server vs the server, concurrency 1 / 8",
        bench="bench_serve_proxy.py",
        goal=">= 0.6 / 0.6",
        measure=_serve_proxy,
    ),
    Row(
        name="empty run_script inside a running gateway vs python -c pass",
        bench="bench_script_start.py",
        goal="<= python start + 30 ms",
        measure=_script_start,
    ),
    Row(
        name="sagents --help vs python -c pass",
        bench="bench_cli_start.py",
        goal="<= python start + 300 ms",
        measure=_cli_start,
    ),
    Row(
        name="suggest_tools per query on 2,000 tools (index built), CPU",
        bench="bench_suggest.py",
        goal="<= 10 ms",
        measure=_suggest_cost,
    ),
    Row(
        name="suggest_tools recall@5 / @10 on pooled non-live BFCL (769 functions)",
        bench="bench_suggest.py",
        goal=">= 0.9 / 0.95",
        measure=_suggest_recall,
    ),
)


def _cell(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per row (default 3)")
    parser.add_argument(
        "--only", nargs="*", default=None, help="only the rows whose benchmark is one of these"
    )
    options = parser.parse_args()
    print(f"| path | benchmark | figures (min / median of {options.runs} runs) | goal |")
    print("|---|---|---|---|")
    for row in ROWS:
        if options.only is not None and row.bench not in options.only:
            continue
        if row.measure is None:
            cell = f"not measured here: run `.venv/bin/python bench/{row.bench}`"
        else:
            runs: dict[str, list[float]] = {}
            for _ in range(options.runs):
                for label, value in row.measure().items():
                    runs.setdefault(label, []).append(value)
            cell = "; ".join(f"{label} {_cell(values)}" for label, values in runs.items())
        print(f"| {row.name} | `{row.bench}` | {cell} | {row.goal} |", flush=True)


if __name__ == "__main__":
    main()

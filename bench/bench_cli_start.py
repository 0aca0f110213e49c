"""Start-up cost of the ``sagents`` command: ``sagents --help`` against ``python -c pass``.

Run: ``.venv/bin/python bench/bench_cli_start.py [--runs N] [--json]``.

Each round starts each command once, alternating, as fresh processes of this interpreter
(``sagents --help`` as the console script runs it: import ``sagents.cli.main``, call
``main()``). Reported per command: the minimum and median wall time
over the rounds; then the difference (the goal: ``sagents --help`` within 0.3 s of the bare
interpreter) and the ratio, both of the medians. A third row starts
``from sagents.tool.tool_base import tool``, what a program with local tools pays. Both wall
time (what the user waits) and the children's CPU time (user + system, which a loaded, shared
machine disturbs far less) are given. Not a test.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "sagents --help": [
        sys.executable,
        "-c",
        "import sys; sys.argv = ['sagents', '--help']; from sagents.cli.main import main; main()",
    ],
    "import sagents.tool.tool_base": [
        sys.executable,
        "-c",
        "from sagents.tool.tool_base import tool",
    ],
}
BASELINE = "python -c pass"


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _start_s(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one start of ``argv``."""
    cpu, start = _children_cpu_s(), time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start, _children_cpu_s() - cpu


def measure(runs: int) -> dict[str, dict[str, float]]:
    """Per command: min and median wall and CPU seconds, difference and ratio to python."""
    for argv in COMMANDS.values():
        _start_s(argv)  # warm the page cache and the bytecode caches
    wall: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, argv in COMMANDS.items():
            wall_s, cpu_s = _start_s(argv)
            wall[name].append(wall_s)
            cpu[name].append(cpu_s)
    base_wall = statistics.median(wall[BASELINE])
    base_cpu = statistics.median(cpu[BASELINE])
    report = {}
    for name in COMMANDS:
        median_wall, median_cpu = statistics.median(wall[name]), statistics.median(cpu[name])
        report[name] = {
            "min_s": min(wall[name]),
            "median_s": median_wall,
            "minus_python_s": median_wall - base_wall,
            "ratio": median_wall / base_wall,
            "cpu_min_s": min(cpu[name]),
            "cpu_median_s": median_cpu,
            "cpu_minus_python_s": median_cpu - base_cpu,
            "cpu_ratio": median_cpu / base_cpu,
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="rounds (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    options = parser.parse_args()
    report = measure(options.runs)
    if options.json:
        print(json.dumps(report))
        return
    print(f"start-up over {options.runs} rounds (difference and ratio of the medians)")
    for kind, prefix in (("wall", ""), ("CPU", "cpu_")):
        for name, row in report.items():
            print(
                f"{kind:4} {name:30} min {row[prefix + 'min_s'] * 1e3:7.1f} ms"
                f"  median {row[prefix + 'median_s'] * 1e3:7.1f} ms"
                f"  - python {row[prefix + 'minus_python_s'] * 1e3:+7.1f} ms"
                f"  ratio {row[prefix + 'ratio']:5.2f}"
            )


if __name__ == "__main__":
    main()

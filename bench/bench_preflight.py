"""The run_script pre-flight check on a corpus of broken scripts: share caught, time per script.

The corpus (``tests/script/fixtures/preflight_corpus``) holds realistic scripts over the
reference servers (the fleet demo, ``mcp-server-git``, sagents' memory and todo servers) with
mistakes; each line holding a statically visible mistake ends with ``# MISTAKE``. Each script's
plan is built from the servers' live ``tools/list`` as a run builds it (``plan_script`` with the
file's ``tools`` and ``mode``), and the pre-flight runs on it.

Prints: the mistakes caught (a finding on the marked line) out of all marked, findings on
unmarked lines (false positives), and the median time per script of the check against
``ast.parse`` of the same script (the baseline: the check parses once, then walks the tree).
Not a test.

Usage: ``.venv/bin/python bench/bench_preflight.py [ROUNDS]``
"""

from __future__ import annotations

import ast
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus lives under tests/

from sagents.script._policy import ScriptPlan, plan_script
from sagents.script._preflight import preflight_findings
from tests.script.preflight_reference import corpus_scripts, reference_specs


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as data_dir:
        specs = anyio.run(reference_specs, Path(data_dir))
    scripts = corpus_scripts()
    plans: list[ScriptPlan] = [plan_script(specs, s.tools, s.mode) for s in scripts]
    marked = caught = false = 0
    for script, plan in zip(scripts, plans, strict=True):
        lines = {finding.line for finding in preflight_findings(script.code, plan)}
        marked += len(script.mistakes)
        caught += len(script.mistakes & lines)
        false += len(lines - script.mistakes)
        for missed in sorted(script.mistakes - lines):
            print(f"missed: {script.name}:{missed}")
    check_s: list[float] = []
    parse_s: list[float] = []
    for _ in range(rounds):
        for script, plan in zip(scripts, plans, strict=True):
            start = time.perf_counter()
            ast.parse(script.code)
            parse_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            preflight_findings(script.code, plan)
            check_s.append(time.perf_counter() - start)
    check_ms = statistics.median(check_s) * 1000
    parse_ms = statistics.median(parse_s) * 1000
    p99_ms = statistics.quantiles(check_s, n=100)[98] * 1000
    print(f"corpus: {len(scripts)} scripts, {marked} statically visible mistakes")
    print(f"caught before a sandbox starts: {caught}/{marked} ({caught / marked:.1%})")
    print(f"findings on lines without a mistake: {false}")
    print(
        f"time per script: median {check_ms:.3f} ms (ast.parse alone {parse_ms:.3f} ms, "
        f"x{check_ms / parse_ms:.2f}), 99th percentile {p99_ms:.3f} ms over {rounds} rounds"
    )


if __name__ == "__main__":
    main()

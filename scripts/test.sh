#!/usr/bin/env bash
# The whole test suite, from nothing: set up (scripts/setup.sh --test), then ruff (lint and format
# check), mypy --strict over sagents/ and tests/, and pytest. Exits non-zero when anything fails,
# including pytest's exit code 5 ("no tests collected"). Extra arguments go to pytest.
#
# pytest runs in parallel (pytest-xdist): SAGENTS_TEST_WORKERS workers (default: twice the CPU
# count, at least 2 and at most 8: most tests wait on subprocesses, servers and sandboxes rather
# than compute), with --dist loadscope so that a module's shared servers stay in one worker.
# SAGENTS_TEST_WORKERS=0 runs serially.
#
#   scripts/test.sh                # everything (what CI runs: .ci/run)
#   scripts/test.sh --fast         # the fast tier: no tests marked slow (real sandboxes, Node
#                                  # clients, the README's commands...), and no ruff/mypy
#   scripts/test.sh tests/cli -x   # extra arguments go to pytest
#   scripts/test.sh --real-model   # only the opt-in real-model tier (scripts/real-model.sh:
#                                  # llama-cpp-python's server with Gemma 3 270M, built once);
#                                  # not part of the default run, so not of CI's
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "${1:-}" = "--real-model" ]; then
    shift
    scripts/setup.sh --test
    exec scripts/real-model.sh "$@"
fi
fast=0
if [ "${1:-}" = "--fast" ]; then
    fast=1
    shift
fi
scripts/setup.sh --test
if [ "$fast" = 0 ]; then
    echo "== ruff check" >&2
    .venv/bin/ruff check sagents tests bench examples scripts
    echo "== ruff format --check" >&2
    .venv/bin/ruff format --check sagents tests bench examples scripts
    echo "== mypy --strict" >&2
    .venv/bin/mypy
fi
workers="${SAGENTS_TEST_WORKERS:-}"
if [ -z "$workers" ]; then
    cpus="$(nproc 2>/dev/null || echo 2)"
    workers=$((cpus * 2))
    [ "$workers" -lt 2 ] && workers=2
    [ "$workers" -gt 8 ] && workers=8
fi
parallel=()
[ "$workers" != 0 ] && parallel=(-n "$workers" --dist loadscope)
marks=()
[ "$fast" = 1 ] && marks=(-m "not slow")
echo "== pytest (${workers} workers${marks:+, fast tier})" >&2
status=0
.venv/bin/python -m pytest "${parallel[@]}" "${marks[@]}" "$@" || status=$?
if [ "$status" = 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$status"

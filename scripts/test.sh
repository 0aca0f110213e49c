#!/usr/bin/env bash
# The whole test suite, from nothing: set up (scripts/setup.sh --test), then ruff (lint and format
# check), mypy --strict over sagents/ and tests/, and pytest. Exits non-zero when anything fails,
# including pytest's exit code 5 ("no tests collected"). Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh --test
echo "== ruff check" >&2
.venv/bin/ruff check sagents tests bench examples scripts
echo "== ruff format --check" >&2
.venv/bin/ruff format --check sagents tests bench examples scripts
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== pytest" >&2
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ "$status" = 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$status"

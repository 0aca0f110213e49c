#!/usr/bin/env bash
# Check the README's two set-up commands from a fresh clone of the current commit: clone into a
# temporary folder, run `scripts/run.sh` (the main job) and `scripts/test.sh` (the whole test
# suite), and fail if either fails. Not part of the test command (it would call itself).
# Usage: scripts/check-fresh-clone.sh [--keep]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d /tmp/sagents-fresh.XXXXXX)"
keep=0
[ "${1:-}" = "--keep" ] && keep=1
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
git clone -q "$root" "$work/sagents"
cd "$work/sagents"
echo "fresh clone at $work/sagents ($(git rev-parse --short HEAD))" >&2
echo "== ./scripts/run.sh" >&2
./scripts/run.sh
echo "== ./scripts/test.sh" >&2
./scripts/test.sh
echo "fresh clone: both set-up commands succeeded" >&2

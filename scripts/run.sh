#!/usr/bin/env bash
# The main job, from nothing: set up .venv (scripts/setup.sh), then run `sagents demo`.
# Extra arguments replace `demo` (for example: scripts/run.sh serve --config servers.json).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
if [ "$#" -eq 0 ]; then
    set -- demo
fi
exec .venv/bin/sagents "$@"

#!/usr/bin/env bash
# Take the web console's screenshots for docs/console.md (docs/img/console-*.png): the browser
# tests save one per page when SAGENTS_CONSOLE_SCREENSHOTS names a folder.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
SAGENTS_CONSOLE_SCREENSHOTS="$root/docs/img" .venv/bin/python -m pytest \
    tests/gateway/console/test_console_browser.py -q -p no:cacheprovider "$@"

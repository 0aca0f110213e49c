#!/usr/bin/env bash
# Set up everything sagents needs, from nothing, into the repository:
#   - system packages (bubblewrap, git; with --test, postgresql for the shared-store tests and
#     chromium for the console's browser tests) with apt-get when root, or a clear message otherwise;
#   - .venv in the repository root with sagents (editable) and, with --test, its test tools;
#   - with --test, the reference MCP servers the tests talk to (scripts/setup-peers.sh).
# Idempotent: a second run only checks. Usage: scripts/setup.sh [--test]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
with_test=0
[ "${1:-}" = "--test" ] && with_test=1

say() { printf 'setup: %s\n' "$*" >&2; }

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v git >/dev/null 2>&1 || missing+=(git)
# The store tests start their own PostgreSQL server from these binaries (no system service).
if [ "$with_test" = 1 ] && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    missing+=(postgresql)
fi
if [ "$with_test" = 1 ]; then  # the web console's browser tests (tests/gateway/console/)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing system packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
    else
        say "missing system packages: ${missing[*]}."
        say "install them with: sudo apt-get install ${missing[*]}"
        say "(without bubblewrap the 'local' sandbox is unavailable; sagents refuses to fall back silently)"
    fi
fi

python="${PYTHON:-}"
if [ -z "$python" ]; then
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            python="$candidate"
            break
        fi
    done
fi
[ -n "$python" ] || { say "Python >= 3.11 is required (set PYTHON=/path/to/python3.11)"; exit 1; }

if [ ! -x .venv/bin/python ]; then
    say "creating .venv with $python"
    "$python" -m venv .venv
fi

extras=""
[ "$with_test" = 1 ] && extras="[dev]"
stamp=".venv/.sagents-installed$extras"
want="$(cat pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "installing sagents$extras into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras"
    echo "$want" > "$stamp"
fi

# The data of bench/bench_suggest.py (questions, function docs, answers): the wheel only, since
# its own dependencies (torch, cloud SDKs) are not needed to read it.
BFCL_EVAL="bfcl-eval==2026.3.23"
if [ "$with_test" = 1 ] && ! .venv/bin/python -c "import bfcl_eval" 2>/dev/null; then
    say "installing $BFCL_EVAL (data only) into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$BFCL_EVAL"
fi

if [ "$with_test" = 1 ] && [ -x scripts/setup-peers.sh ]; then
    scripts/setup-peers.sh
fi

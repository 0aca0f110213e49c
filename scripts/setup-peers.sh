#!/usr/bin/env bash
# Install the reference MCP servers the tests talk to, into .peers/ (never into .venv):
#   - PyPI mcp-server-time and mcp-server-git in their own venv, .peers/venv (they may pin
#     another mcp than sagents);
#   - npm @modelcontextprotocol/server-everything, server-filesystem and server-memory into
#     .peers/node, at the versions pinned in tests/peers/package.json.
# Idempotent and quick when already installed (a stamp of the pinned lists). Called by
# scripts/setup.sh --test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf 'setup-peers: %s\n' "$*" >&2; }
mkdir -p .peers

python="${PYTHON:-python3}"
py_want="$(sha256sum tests/peers/requirements.txt | cut -d' ' -f1)"
py_stamp=.peers/venv/.installed
if [ ! -f "$py_stamp" ] || [ "$(cat "$py_stamp")" != "$py_want" ]; then
    say "installing Python MCP servers into .peers/venv"
    [ -x .peers/venv/bin/python ] || "$python" -m venv .peers/venv
    .peers/venv/bin/python -m pip install -q --disable-pip-version-check -r tests/peers/requirements.txt
    echo "$py_want" > "$py_stamp"
fi

if command -v npm >/dev/null 2>&1; then
    node_want="$(sha256sum tests/peers/package.json | cut -d' ' -f1)"
    node_stamp=.peers/node/.installed
    if [ ! -f "$node_stamp" ] || [ "$(cat "$node_stamp")" != "$node_want" ]; then
        say "installing npm MCP servers into .peers/node"
        mkdir -p .peers/node
        cp tests/peers/package.json .peers/node/package.json
        npm install --prefix .peers/node --no-audit --no-fund --loglevel=error >/dev/null
        echo "$node_want" > "$node_stamp"
    fi
else
    say "npm not found: the tests against the npm reference servers will fail (install nodejs and npm)"
fi

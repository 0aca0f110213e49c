#!/usr/bin/env bash
# Install the reference MCP servers the tests talk to, into .peers/ (never into .venv):
#   - PyPI mcp-server-time and mcp-server-git in their own venv, .peers/venv (they may pin
#     another mcp than sagents);
#   - npm @modelcontextprotocol/server-everything, server-filesystem and server-memory, and
#     oidc-provider (the authorization server of the OAuth tests), into .peers/node, at the
#     versions pinned in tests/peers/package.json; the AG-UI client (@ag-ui/client) into
#     .peers/ag-ui, pinned in tests/peers/ag-ui/package.json;
#   - the package caches a sandboxed `npx`/`uvx` server starts from offline (docs/mcp.md,
#     "Profiles of typical servers"): .peers/npm-cache filled by `npx -y` of server-filesystem,
#     .peers/uv-cache by `uvx` of mcp-server-git and mcp-server-time (the uv of .venv, pinned in
#     pyproject.toml's dev extra), at the versions pinned in tests/peers/.
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
    # The reference AG-UI client the AG-UI route's tests drive (tests/agent/test_ag_ui_client.py),
    # in a folder of its own so that its pins never disturb the MCP servers'.
    agui_want="$(sha256sum tests/peers/ag-ui/package.json | cut -d' ' -f1)"
    agui_stamp=.peers/ag-ui/.installed
    if [ ! -f "$agui_stamp" ] || [ "$(cat "$agui_stamp")" != "$agui_want" ]; then
        say "installing the AG-UI client into .peers/ag-ui"
        mkdir -p .peers/ag-ui
        cp tests/peers/ag-ui/package.json .peers/ag-ui/package.json
        npm install --prefix .peers/ag-ui --no-audit --no-fund --loglevel=error >/dev/null
        echo "$agui_want" > "$agui_stamp"
    fi
else
    say "npm not found: the tests against the npm reference servers will fail (install nodejs and npm)"
fi

# The caches hold what `npx -y <package>@<version>` and `uvx <package>@<version>` fetch; the
# tests copy them into a sandboxed server's home and start it with --offline. uv builds its
# environments on the Python the sandbox finds first on its PATH.
fs_version="$(sed -n 's|.*"@modelcontextprotocol/server-filesystem": "\([^"]*\)".*|\1|p' tests/peers/package.json)"
npm_spec="@modelcontextprotocol/server-filesystem@$fs_version"
npm_stamp=.peers/npm-cache/.filled
if command -v npx >/dev/null 2>&1 && { [ ! -f "$npm_stamp" ] || [ "$(cat "$npm_stamp")" != "$npm_spec" ]; }; then
    say "filling .peers/npm-cache with $npm_spec"
    mkdir -p .peers/npm-cache
    scratch="$(mktemp -d)"
    # The server exits when its stdin ends: this run only installs it into the cache.
    npm_config_cache="$root/.peers/npm-cache" npm_config_update_notifier=false \
        npx -y "$npm_spec" "$scratch" </dev/null >/dev/null \
        || { say "npx -y $npm_spec failed (see the lines above)"; exit 1; }
    rmdir "$scratch"
    rm -rf .peers/npm-cache/_logs
    echo "$npm_spec" > "$npm_stamp"
fi

uvx="$root/.venv/bin/uvx"
[ -x "$uvx" ] || uvx="$(command -v uvx || true)"
sandbox_python="$(PATH=/usr/local/bin:/usr/bin:/bin command -v python3 || true)"
uv_specs="$(sed -n 's|^\(mcp-server-[a-z]*\)==\(.*\)$|\1@\2|p' tests/peers/requirements.txt | sort | tr '\n' ' ')"
uv_want="$uv_specs$sandbox_python $([ -z "$sandbox_python" ] || "$sandbox_python" -V 2>&1)"
uv_stamp=.peers/uv-cache/.filled
if [ -z "$uvx" ] || [ -z "$sandbox_python" ]; then
    say "uvx (scripts/setup.sh --test installs it into .venv) or a python3 under /usr is missing:"
    say "the tests of sandboxed uvx servers will fail"
elif [ ! -f "$uv_stamp" ] || [ "$(cat "$uv_stamp")" != "$uv_want" ]; then
    say "filling .peers/uv-cache with $uv_specs"
    for spec in $uv_specs; do
        UV_CACHE_DIR="$root/.peers/uv-cache" UV_PYTHON_DOWNLOADS=never \
            "$uvx" --quiet --python "$sandbox_python" "$spec" --help >/dev/null \
            || { say "uvx $spec failed (see the lines above)"; exit 1; }
    done
    echo "$uv_want" > "$uv_stamp"
fi

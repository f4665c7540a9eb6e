#!/usr/bin/env bash
# End-to-end test of the LLM layer against a real OpenAI-compatible model
# server: llama.cpp's server (llama-cpp-python, built from PyPI's source
# package: about 20 minutes on 2 cores the first time) serving a tiny model
# generated locally with the `gguf` package (no model hub needed).
#
#   scripts/llm_e2e.sh [BUILD_DIR]     (default: build)
# Environment: LLM_E2E_VENV (default ~/.cache/adaexplore/llm-e2e-venv), LLM_E2E_PORT (18431).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
VENV=${LLM_E2E_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/adaexplore/llm-e2e-venv}
PORT=${LLM_E2E_PORT:-18431}
TEST_BIN="$BUILD/src/llm/adaexplore_llm_tests"
[ -x "$TEST_BIN" ] || { echo "llm_e2e: $TEST_BIN not built; run: cmake -S . -B $BUILD -G Ninja && ninja -C $BUILD" >&2; exit 2; }

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import llama_cpp.server, gguf" 2>/dev/null; then
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    "$VENV/bin/pip" install --quiet "llama-cpp-python[server]" gguf
fi

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

"$VENV/bin/python" tests/cpp/llm/make_tiny_gguf.py "$WORK/tiny.gguf" >/dev/null
"$VENV/bin/python" -m llama_cpp.server --model "$WORK/tiny.gguf" --host 127.0.0.1 --port "$PORT" \
  --chat_format chatml --n_ctx 256 >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "llm_e2e: model server exited:" >&2; tail -20 "$WORK/server.log" >&2; exit 1; }
  sleep 0.5
done
ADAEXPLORE_LLM_E2E_URL="http://127.0.0.1:$PORT/v1" "$TEST_BIN" --gtest_filter='E2eCompat.*'

#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: the C++ unit tests (ctest),
# the judge's end-to-end corpus and the Python package on the CPU (pytest),
# and the wheel installed into a fresh virtual environment (test_wheel.sh). GPU tests live in
# tests/gpu/run.sh and run on a machine with an NVIDIA GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Tests that start judge workers use the project's Python (torch, triton).
export ADAEXPLORE_PYTHON="${ADAEXPLORE_PYTHON:-$PWD/.venv/bin/python}"
ctest --test-dir build --output-on-failure -j 2
.venv/bin/python -m pytest -q tests/py "$@"
bash scripts/test_wheel.sh

#!/usr/bin/env bash
# The GPU suite, on a machine with an NVIDIA GPU: the bundled example, then
# every corpus case (tests/gpu/run_suite.py). Uses build/adaexplore unless
# ADAEXPLORE_BIN is set, and python3 (with torch and triton) unless
# ADAEXPLORE_PYTHON is set.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${ADAEXPLORE_BIN:-build/adaexplore}
export ADAEXPLORE_PYTHON=${ADAEXPLORE_PYTHON:-python3}
export ADAEXPLORE_WORKER_DIR=${ADAEXPLORE_WORKER_DIR:-$PWD/python}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$BIN" eval examples/tasks/1_BiasReLUScale.py examples/candidates/1_BiasReLUScale_triton.py --device cuda:0 || echo "the bundled example did not pass (exit $?)"
python3 tests/gpu/run_suite.py --bin "$BIN" --device cuda:0 --jobs "${JOBS:-4}" ${OUT:+--out "$OUT/gpu_suite.txt"}
python3 tests/gpu/check_timing_modes.py --bin "$BIN" --device cuda:0 ${OUT:+--json "$OUT/timing_modes.json"}

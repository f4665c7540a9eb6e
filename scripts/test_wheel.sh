#!/usr/bin/env bash
# Builds the Python wheel (pip wheel ., reusing build/'s objects through
# ccache), installs it into a fresh virtual environment outside the source
# tree, and runs the installed `adaexplore eval` on the bundled example and a
# three-line Python script there. Prints the wheel's size and the build and
# install times. Run by scripts/test.sh after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TASK=$ROOT/examples/tasks/1_BiasReLUScale.py
CAND=$ROOT/examples/candidates/1_BiasReLUScale_triton.py
now() { date +%s.%N; }

dist=$ROOT/build/dist
rm -rf "$dist"
# The compiler of build/ (ccache's key holds its name), so that the wheel's
# objects are cache hits of build/'s.
CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' build/CMakeCache.txt)
export CXX
t0=$(now)
.venv/bin/python -m pip wheel . --no-build-isolation --no-deps -q -w "$dist"
t1=$(now)
whl=$(ls "$dist"/adaexplore-*.whl)

work=$(mktemp -d /tmp/adaexplore-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
base=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
"$base" -m venv "$work/venv"
V=$work/venv
# torch and triton (4 GB) come from .venv through a .pth file instead of a
# second download; pip still checks the wheel's requirements against them.
"$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$work/site"
.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$(cat "$work/site")/_adaexplore_shared_torch.pth"
t2=$(now)
"$V/bin/python" -m pip install -q --no-index "$whl"
t3=$(now)

cd "$work"  # no source tree on the path
unset ADAEXPLORE_PYTHON ADAEXPLORE_PROMPTS_DIR ADAEXPLORE_WORKER_DIR PYTHONPATH
export ADAEXPLORE_CACHE_DIR=$work/cache
version=$("$V/bin/adaexplore" --version)
echo "$version"
grep -q "prompts: $V/lib/" <<<"$version" || { echo "test_wheel: the installed command does not use its own prompts" >&2; exit 1; }
grep -q "worker: $V/lib/" <<<"$version" || { echo "test_wheel: the installed command does not use its own worker" >&2; exit 1; }
"$V/bin/adaexplore" eval "$TASK" "$CAND" --device cpu --trials 2 --iters 2 --warmup 1 --json > "$work/eval.json"
"$V/bin/python" -c 'import json, sys; v = json.loads(open(sys.argv[1]).read().splitlines()[-1]); assert v["correct"], v' "$work/eval.json"
"$V/bin/python" - "$TASK" "$CAND" "$V" <<'PY'
import sys, adaexplore
assert adaexplore.__file__.startswith(sys.argv[3]), adaexplore.__file__
print(adaexplore.evaluate(sys.argv[1], sys.argv[2], device="cpu", trials=2, iters=2, warmup=1))
PY
size=$(stat -c %s "$whl")
awk -v b="$t0" -v w="$t1" -v i0="$t2" -v i1="$t3" -v s="$size" -v f="$(basename "$whl")" 'BEGIN {
  printf "test_wheel: ok: %s, %.1f MB; built in %.1f s, installed in %.1f s\n", f, s / 1e6, w - b, i1 - i0 }'

#!/usr/bin/env bash
# Sets up adaexplore on a fresh Debian/Ubuntu machine: system packages (when
# run as root and something is missing), the C++ build in build/ (with the
# Python extension in build/python), and the judge worker's Python
# environment in .venv/. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev libsqlite3-dev libssl-dev
      libgtest-dev libcurl4-openssl-dev libcpp-httplib-dev libhiredis-dev redis-server procps chromium ccache)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]} (run as root or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  if ! "$PY" -m venv .venv 2>/dev/null; then
    if [[ $(id -u) -eq 0 ]]; then
      apt-get install -y -qq python3-venv >/dev/null
      "$PY" -m venv .venv
    else
      echo "setup: $PY cannot create a virtual environment (install python3-venv)" >&2
      exit 1
    fi
  fi
fi
stamp=.venv/.requirements.sha256
want=$(sha256sum python/requirements.txt | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "setup: installing the worker's Python packages into .venv (torch, triton)"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r python/requirements.txt
  echo "$want" > "$stamp"
fi

# The Python extension (build/python/adaexplore) is built against .venv's Python.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DADAEXPLORE_PYTHON_MODULE=ON \
  -DPython_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build build
echo "setup: ready (build/adaexplore, .venv)"

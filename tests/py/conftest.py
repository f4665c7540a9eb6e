"""Shared fixtures: where the adaexplore binary and the worker's Python are."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Without a GPU, Triton kernels run in this process only in Triton's interpreter (tests that
# load a found kernel as a module), and that is decided when triton is first imported.
if not any(os.path.exists("/dev/nvidia%d" % i) for i in range(16)):
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TASK = ROOT / "examples" / "tasks" / "1_BiasReLUScale.py"
CORPUS = ROOT / "tests" / "corpus"
DATASETS = ROOT.parent / "shared" / "datasets"


def _binary():
    env = os.environ.get("ADAEXPLORE_BIN")
    if env:
        return Path(env)
    return ROOT / "build" / "adaexplore"


@pytest.fixture(scope="session")
def binary():
    b = _binary()
    if not b.exists():
        pytest.fail("adaexplore binary not built: %s (run scripts/setup.sh)" % b)
    return b


@pytest.fixture(scope="session")
def worker_python():
    env = os.environ.get("ADAEXPLORE_PYTHON")
    if env:
        return env
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


@pytest.fixture()
def run_cli(binary, worker_python, tmp_path):
    """Runs the CLI; returns (returncode, stdout, stderr)."""

    def run(*args, timeout=600, env_extra=None):
        env = dict(os.environ)
        env["ADAEXPLORE_PYTHON"] = worker_python
        env.setdefault("ADAEXPLORE_CACHE_DIR", str(tmp_path / "cache"))
        if env_extra:
            env.update(env_extra)
        p = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr

    return run


def last_json(stdout):
    lines = [l for l in stdout.strip().splitlines() if l.strip()]
    assert lines, "no output"
    return json.loads(lines[-1])

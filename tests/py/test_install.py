"""`cmake --install build --prefix P`: the installed binary finds its prompts and
worker package next to itself (P/share/adaexplore), also after P is moved, and
judges and searches with no ADAEXPLORE_* paths set; the builtin proposer needs
no prompt files."""

import os
import shutil
import subprocess

import pytest

from conftest import EXAMPLE_TASK, ROOT

CANDIDATE = ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"
JUDGE = ["--device", "cpu", "--trials", "2", "--iters", "2", "--warmup", "1"]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    where = tmp_path_factory.mktemp("install") / "first"
    p = subprocess.run(["cmake", "--install", str(ROOT / "build"), "--prefix", str(where)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    moved = where.parent / "moved"
    shutil.move(str(where), str(moved))  # relocatable: nothing points back at the first prefix
    return moved


def clean_env(tmp, worker_python, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAEXPLORE_")}
    env.update(ADAEXPLORE_PYTHON=worker_python, ADAEXPLORE_CACHE_DIR=str(tmp / "cache"), **extra)
    return env


def test_layout(prefix):
    assert (prefix / "bin" / "adaexplore").is_file()
    assert (prefix / "share" / "adaexplore" / "prompts" / "system.txt").is_file()
    assert (prefix / "share" / "adaexplore" / "python" / "adaexplore_worker" / "__main__.py").is_file()
    assert not list(prefix.rglob("__pycache__"))


def test_installed_binary_uses_its_own_files(prefix, tmp_path, worker_python):
    p = subprocess.run([str(prefix / "bin" / "adaexplore"), "--version"], capture_output=True, text=True,
                       env=clean_env(tmp_path, worker_python), cwd=tmp_path)
    assert p.returncode == 0
    assert "prompts: %s/share/adaexplore/prompts" % prefix in p.stdout, p.stdout
    assert "worker: %s/share/adaexplore/python" % prefix in p.stdout, p.stdout
    # The environment still overrides.
    p = subprocess.run([str(prefix / "bin" / "adaexplore"), "--version"], capture_output=True, text=True,
                       env=clean_env(tmp_path, worker_python, ADAEXPLORE_PROMPTS_DIR="/elsewhere"), cwd=tmp_path)
    assert "prompts: /elsewhere" in p.stdout


def test_installed_binary_judges_and_searches(prefix, tmp_path, worker_python):
    env = clean_env(tmp_path, worker_python)
    b = str(prefix / "bin" / "adaexplore")
    p = subprocess.run([b, "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--json"] + JUDGE, capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    assert '"correct":true' in p.stdout.replace(" ", "")
    # The builtin proposer reads no prompt files; an LLM proposer needs them.
    empty = tmp_path / "no-prompts"
    empty.mkdir()
    env_np = dict(env, ADAEXPLORE_PROMPTS_DIR=str(empty))
    p = subprocess.run([b, "optimize", str(EXAMPLE_TASK), "--proposer", "builtin", "--steps", "1", "--out",
                        str(tmp_path / "run")] + JUDGE, capture_output=True, text=True, env=env_np, cwd=tmp_path,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "run" / "best.py").is_file()
    p = subprocess.run([b, "optimize", str(EXAMPLE_TASK), "--proposer", "replay:%s" % (tmp_path / "none.jsonl"),
                        "--steps", "1", "--out", str(tmp_path / "run2")] + JUDGE, capture_output=True, text=True,
                       env=env_np, cwd=tmp_path, timeout=600)
    assert p.returncode == 3 and "prompt template missing: %s/system.txt" % empty in p.stderr, p.stderr

"""bench/bandwidth.py on the CPU: the two-pass bound's arithmetic, and a clear refusal without a GPU."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "bandwidth.py"


def load():
    spec = importlib.util.spec_from_file_location("bench_bandwidth", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_two_pass_bound_counts_the_second_read():
    bw = load()
    # read as fast as copy, no parameters: 3 units of traffic for 2 counted -> 2/3 of copy
    t, frac = bw.two_pass_bound(1e9, 1e9, 0, 4e12, 4e12)
    assert t == pytest.approx(3e9 / 4e12)
    assert frac == pytest.approx(2 / 3)
    # parameters read once more lower it further; a faster read raises it
    assert bw.two_pass_bound(1e9, 1e9, 1e8, 4e12, 4e12)[1] < frac
    assert bw.two_pass_bound(1e9, 1e9, 0, 8e12, 4e12)[1] == pytest.approx(2 / 2.5)


def test_without_cuda_it_says_so_and_exits_2():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; this checks the refusal without one")
    r = subprocess.run([sys.executable, str(SCRIPT), "--gib", "0.01"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "no CUDA device" in r.stderr

"""--timing host|gpu: what a timed call covers. On the CPU only the refusals and the recorded
value can be checked; the GPU side runs in bench/timing_modes.py on a GPU."""

import json
import sys

import pytest

from conftest import EXAMPLE_TASK, ROOT, last_json

sys.path.insert(0, str(ROOT / "python"))

from adaexplore_worker import common  # noqa: E402

EXAMPLE_CANDIDATE = ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"


def test_unknown_timing_is_refused(run_cli):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, EXAMPLE_CANDIDATE, "--device", "cpu", "--timing", "wall")
    assert rc == 2
    assert err.strip().splitlines()[-1] == "adaexplore: unknown timing 'wall' (host or gpu)"


def test_gpu_timing_needs_a_gpu(run_cli):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, EXAMPLE_CANDIDATE, "--device", "cpu", "--timing", "gpu")
    assert rc == 2
    assert "--timing gpu needs a CUDA device" in err.strip().splitlines()[-1]


def test_host_timing_is_recorded(run_cli, tmp_path):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, EXAMPLE_CANDIDATE, "--device", "cpu", "--json", "--no-cache",
                           "--iters", "2", "--warmup", "1", "--trials", "1", "--timing", "host")
    assert rc == 0, err
    v = last_json(out)
    assert v["timing_mode"] == "host"
    assert "timing" not in v["protocol"]  # host timing keeps the cache keys it always had
    run = tmp_path / "run"
    rc, so, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", "builtin", "--steps", "1", "--device", "cpu",
                          "--no-cache", "--iters", "2", "--warmup", "1", "--trials", "1", "--out", run)
    assert rc == 0, err
    assert json.loads((run / "summary.json").read_text())["timing"] == "host"


def test_the_worker_timer_refuses_gpu_timing_off_a_gpu():
    with pytest.raises(ValueError, match="gpu timing needs a CUDA device"):
        common.Timer("cpu", 0, timing="gpu")
    with pytest.raises(ValueError, match="unknown timing"):
        common.Timer("cpu", 0, timing="wall")

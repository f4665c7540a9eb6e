"""bench/plan_ab.py: the pairing of plans, the table, and one real run on the CPU (the binary
generates both sides of a small convolution + group norm task and the judge runs them under
Triton's interpreter)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("bench_plan_ab", ROOT / "bench" / "plan_ab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pair_takes_the_first_plan_with_the_key_and_removes_only_the_key():
    ab = load()
    plans = [{"v": 1}, {"conv": True, "v": 1}, {"conv": True, "convstats": True, "normepi": True, "gemm": [[1, 2]]},
             {"conv": True, "convstats": True}]
    with_, without = ab.pair(plans, "convstats")
    assert with_ is plans[2]
    assert without == {"conv": True, "normepi": True, "gemm": [[1, 2]]}
    assert ab.pair(plans, "attention") is None


def verdict(name, side, ms, correct=True):
    return {"task": {"name": name}, "candidate": {"path": f"/x/{name}_{side}.py"}, "correct": correct,
            "status": "ok" if correct else "mismatch", "runtime_ms": ms, "baseline_ms": {"eager": 2.0}}


def test_table_ratios_and_geomean_over_tasks_where_both_are_correct():
    ab = load()
    rows = [verdict("a", "with", 1.0), verdict("a", "without", 2.0), verdict("b", "with", 3.0),
            verdict("b", "without", 1.5), verdict("c", "with", 1.0, correct=False), verdict("c", "without", 1.0)]
    out = ab.table(rows, "convstats")
    lines = out.splitlines()
    assert "0.500" in lines[1] and "2.000" in lines[2]
    assert "mismatch" in lines[3] and lines[3].split()[3] == "-"
    assert lines[-1] == "convstats: with / without geomean 1.000 over 2 tasks; faster with it on 1"


TASK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))

def get_inputs():
    return [torch.randn(2, 3, 8, 8)]

def get_init_inputs():
    return []
'''


def test_a_real_run_judges_both_sides(binary, worker_python, tmp_path):
    task = tmp_path / "conv_group_norm.py"
    task.write_text(TASK)
    env = dict(os.environ, ADAEXPLORE_PYTHON=worker_python, ADAEXPLORE_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "plan_ab.py"), str(task), "--key", "convstats",
                        "--bin", str(binary), "--device", "cpu", "--out", str(tmp_path / "ab"), "--trials", "1",
                        "--iters", "1", "--warmup", "0"], capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr
    with_src = (tmp_path / "ab" / "conv_group_norm_with.py").read_text()
    without_src = (tmp_path / "ab" / "conv_group_norm_without.py").read_text()
    assert "_stats_merge" in with_src and "_stats_merge" not in without_src
    verdicts = [json.loads(l) for l in (tmp_path / "ab" / "verdicts.jsonl").read_text().splitlines() if l]
    assert len(verdicts) == 2 and all(v["correct"] for v in verdicts), verdicts
    assert "convstats: with / without geomean" in p.stdout and "over 1 tasks" in p.stdout


def test_bad_input_gets_one_line_and_a_nonzero_exit(tmp_path):
    script = str(ROOT / "bench" / "plan_ab.py")
    p = subprocess.run([sys.executable, script, "--rows", str(tmp_path / "none.jsonl")], capture_output=True, text=True)
    assert p.returncode == 2 and "no such verdicts file" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, script, "t.py", "--bin", str(tmp_path / "no-binary")], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "no adaexplore binary" in p.stderr and "Traceback" not in p.stderr

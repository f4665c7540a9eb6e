"""The worker's side of the verdict's profile: the kernels of one profiled call summed by name,
the task's least bytes, FLOPs and call time from the reference's load, and the measured device
facts (here on the CPU; the GPU figures come from the same code on the device)."""

import sys

import pytest
import torch

from conftest import EXAMPLE_TASK, ROOT

sys.path.insert(0, str(ROOT / "python"))

from adaexplore_worker.candidate import kernel_breakdown  # noqa: E402
from adaexplore_worker.reference import ReferenceRole  # noqa: E402

TOL = {"float32": [1e-4, 1e-4], "float64": [1e-4, 1e-4], "float16": [1e-2, 1e-2], "bfloat16": [1e-2, 1e-2],
       "default": [1e-4, 1e-4]}


def test_kernel_breakdown_sums_by_name_longest_first():
    times = [("copy", 0, 100), ("gemm", 100, 1100), ("copy", 1100, 1300), ("relu", 1300, 1350)]
    rows = kernel_breakdown(times)
    assert [(r["name"], r["launches"]) for r in rows] == [("gemm", 1), ("copy", 2), ("relu", 1)]
    assert [r["ms"] for r in rows] == pytest.approx([1.0, 0.3, 0.05])
    # The kernels' times add up to the call's busy time.
    assert abs(sum(r["ms"] for r in rows) - sum(e - s for _, s, e in times) / 1e3) < 1e-12


def test_kernel_breakdown_folds_the_tail_into_other():
    times = [("k%d" % i, 0, 100 - i) for i in range(60)]
    rows = kernel_breakdown(times, limit=10)
    assert len(rows) == 10 and rows[-1]["name"] == "(other)"
    assert rows[-1]["launches"] == 51
    assert abs(sum(r["ms"] for r in rows) - sum(e - s for _, s, e in times) / 1e3) < 1e-9


def test_reference_load_reports_bytes_flops_and_call_time(tmp_path):
    task = tmp_path / "mm.py"
    task.write_text('''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
''')
    role = ReferenceRole()
    r = role.op_load_task({"device": "cpu", "key": "k", "task": str(task), "init_seed": 42, "probe_seeds": [1, 2],
                           "tolerance": TOL})
    assert r["ok"], r
    assert r["flops"] == 2 * 16 * 64 * 32
    # Inputs, weight and bias, output: each once, in fp32.
    assert r["min_bytes"] == 4 * (16 * 64 + 64 * 32 + 32 + 16 * 32)
    assert 0 < r["call_ms"] < 10_000


def test_reference_load_of_an_elementwise_task_counts_no_flops():
    r = ReferenceRole().op_load_task({"device": "cpu", "key": "e", "task": str(EXAMPLE_TASK), "init_seed": 42,
                                      "probe_seeds": [1, 2], "tolerance": TOL})
    assert r["ok"], r
    assert r["flops"] == 0
    assert r["min_bytes"] == 4 * (2 * 256 * 1024 + 1024)


def test_device_facts_on_the_cpu():
    r = ReferenceRole().op_device_facts({"device": "cpu"})
    assert r["ok"], r
    f = r["facts"]
    assert f["sms"] >= 1 and f["memory_bytes"] > 1 << 28 and f["name"]
    assert 0.1 < f["copy_gbps"] < 10_000
    assert 0 < f["fp32_tflops"] < 1_000
    assert "tf32_tflops" not in f  # a GPU figure

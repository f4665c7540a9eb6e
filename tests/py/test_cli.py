"""The CLI's contract: exit codes, one-line errors, task validation."""

import json

from conftest import CORPUS, EXAMPLE_TASK, ROOT, last_json

TASKS = CORPUS / "tasks"
GOOD = ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"


def one_line_error(err):
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("adaexplore: ")
    return lines[0]


def test_missing_task_file(run_cli, tmp_path):
    rc, out, err = run_cli("eval", tmp_path / "nope.py", GOOD, "--device", "cpu")
    assert rc == 2
    assert "no such task file" in one_line_error(err)


def test_missing_candidate_file(run_cli, tmp_path):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, tmp_path / "nope.py", "--device", "cpu")
    assert rc == 2
    assert "cannot read candidate" in one_line_error(err)


def test_not_a_task(run_cli):
    rc, out, err = run_cli("eval", GOOD, GOOD, "--device", "cpu")
    assert rc == 2
    assert "not a KernelBench task" in one_line_error(err)


def test_bad_tolerance_and_device(run_cli):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, GOOD, "--tolerance", "loose")
    assert rc == 2 and "unknown tolerance" in one_line_error(err)
    rc, out, err = run_cli("eval", EXAMPLE_TASK, GOOD, "--device", "tpu")
    assert rc == 2 and "--device" in one_line_error(err)


def test_task_whose_reference_fails(run_cli):
    rc, out, err = run_cli("eval", TASKS / "3_ForwardRaises.py", GOOD, "--device", "cpu", "--no-cache")
    assert rc == 2
    assert "reference forward failed" in one_line_error(err)


def test_tasks_command_validates_and_flags_degenerate(run_cli):
    rc, out, err = run_cli("tasks", TASKS, "--device", "cpu", "--json")
    assert rc == 1, err  # some tasks are invalid
    rows = {json.loads(l)["task"]: json.loads(l) for l in out.splitlines() if l.strip()}
    assert rows["1_ConstantOutput"]["ok"] and "input_independent" in rows["1_ConstantOutput"]["degenerate"]
    assert rows["2_TinyOutput"]["ok"] and "zero_output_passes" in rows["2_TinyOutput"]["degenerate"]
    assert not rows["3_ForwardRaises"]["ok"] and "forward failed" in rows["3_ForwardRaises"]["error"]
    assert not rows["4_ReturnsList"]["ok"] and "tensor" in rows["4_ReturnsList"]["error"]
    for r in rows.values():
        assert len(r["hash"]) == 64


def test_tasks_on_the_example_is_valid(run_cli):
    rc, out, err = run_cli("tasks", EXAMPLE_TASK, "--device", "cpu", "--json")
    assert rc == 0, err
    row = json.loads(out.strip())
    assert row["outputs"] == [{"shape": [256, 1024], "dtype": "float32"}]
    assert row["degenerate"] == []


def test_degenerate_task_is_flagged_on_verdicts(run_cli, tmp_path):
    cand = tmp_path / "c.py"
    cand.write_text((TASKS / "2_TinyOutput.py").read_text() + '''
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 1e-7, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        scale_kernel[(1,)](x, out, x.numel(), BLOCK=128)
        return out
''')
    rc, out, err = run_cli("eval", TASKS / "2_TinyOutput.py", cand, "--device", "cpu", "--json", "--no-time")
    v = last_json(out)
    assert v["status"] == "ok"
    assert "degenerate_task" in v["flags"] and "degenerate:zero_output_passes" in v["flags"]


def test_cached_verdict_is_marked(run_cli):
    args = ("eval", EXAMPLE_TASK, GOOD, "--device", "cpu", "--json", "--no-time")
    v1 = last_json(run_cli(*args)[1])
    v2 = last_json(run_cli(*args)[1])
    assert not v1["cached"] and v2["cached"]
    assert v2["status"] == v1["status"] == "ok"


def test_reference_failure_is_not_cached_as_the_candidates_verdict(run_cli, tmp_path):
    # The reference survives its two probes at load, then dies in the first
    # comparison: a failure of the judge's side, so it must not be cached.
    task = tmp_path / "dies_in_compare.py"
    task.write_text('''import os
import torch
import torch.nn as nn

CALLS = [0]


class Model(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 2:
            os._exit(3)
        return x * 2.0


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
''')
    cand = tmp_path / "cand.py"
    cand.write_text('''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def twice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        twice_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        return out
''')
    args = ("eval", task, cand, "--device", "cpu", "--json", "--no-time")
    v1 = last_json(run_cli(*args)[1])
    v2 = last_json(run_cli(*args)[1])
    assert v1["status"] == "runtime_error" and "the reference failed" in v1["error"], v1["error"]
    assert "reference_failed" in v1["flags"]
    assert v2["status"] == "runtime_error" and not v2["cached"]

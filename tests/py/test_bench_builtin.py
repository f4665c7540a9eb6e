"""bench/builtin.py's pure parts, on the CPU, without the adaexplore binary: the Level-1
categories, the aggregates (no correct kernel = 1.0x, degenerate tasks excluded), the byte
estimate of a task built on the meta device, and the per-task rows read from a run folder."""

import importlib.util
import json
import math
import sqlite3
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEVEL1 = ROOT.parent / "shared" / "datasets" / "kernelbench" / "level1"


@pytest.fixture(scope="module")
def bb():
    spec = importlib.util.spec_from_file_location("bench_builtin", ROOT / "bench" / "builtin.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name,cat", [
    ("19_ReLU.py", "elementwise"),
    ("20_LeakyReLU", "elementwise"),
    ("26_GELU_.py", "elementwise"),
    ("29_Softplus.py", "elementwise"),
    ("30_Softsign.py", "elementwise"),
    ("88_MinGPTNewGelu.py", "elementwise"),
    ("5_Matrix_scalar_multiplication.py", "elementwise"),
    ("23_Softmax.py", "softmax"),
    ("24_LogSoftmax.py", "softmax"),
    ("33_BatchNorm.py", "normalisation"),
    ("37_FrobeniusNorm_.py", "normalisation"),
    ("47_Sum_reduction_over_a_dimension.py", "reduction"),
    ("51_Argmax_over_a_dimension.py", "reduction"),
    ("94_MSELoss.py", "loss"),
    ("95_CrossEntropyLoss.py", "loss"),
    ("1_Square_matrix_multiplication_.py", "matmul"),
    ("4_Matrix_vector_multiplication_.py", "matmul"),
    ("12_Matmul_with_diagonal_matrices_.py", "matmul"),
    ("50_conv_standard_2D__square_input__square_kernel.py", "conv"),
    ("42_Max_Pooling_2D.py", "pooling"),
    ("89_cumsum.py", "scan"),
    ("93_masked_cumsum.py", "scan"),
    ("97_ScaledDotProductAttention.py", "attention"),
    # Level-2 and Level-3 names are never memory-bound.
    ("33_Gemm_Scale_BatchNorm.py", "matmul"),
    ("49_ConvTranspose3d_Softmax_Sigmoid.py", "conv"),
    ("45_UNetSoftmax.py", "network"),
])
def test_classify(bb, name, cat):
    assert bb.classify(name) == cat


def test_memory_bound_categories(bb):
    assert bb.is_memory_bound(bb.classify("19_ReLU.py"))
    assert bb.is_memory_bound(bb.classify("98_KLDivLoss.py"))
    assert not bb.is_memory_bound(bb.classify("9_Tall_skinny_matrix_multiplication_.py"))
    assert not bb.is_memory_bound(bb.classify("41_Max_Pooling_1D.py"))


@pytest.mark.skipif(not LEVEL1.is_dir(), reason="KernelBench level1 not in shared/datasets")
def test_classify_whole_level1(bb):
    counts = {}
    for f in LEVEL1.glob("*.py"):
        counts[bb.classify(f.name)] = counts.get(bb.classify(f.name), 0) + 1
    assert counts == {"matmul": 17, "elementwise": 14, "softmax": 2, "normalisation": 8, "pooling": 6,
                      "reduction": 6, "conv": 35, "scan": 5, "loss": 6, "attention": 1}


def row(task, level="level2", correct=True, eager=None, compile_=None, degenerate=False, category="conv",
        frac=None):
    return {"task": task, "level": level, "category": category, "memory_bound": category in
            ("elementwise", "normalisation", "reduction", "softmax", "loss"), "correct": correct,
            "speedup_eager": eager, "speedup_compile": compile_, "degenerate": degenerate, "bw_fraction": frac}


def test_aggregate_geomean_uncorrect_is_one_and_degenerate_excluded(bb):
    rows = [
        row("a", eager=4.0, compile_=2.0),
        row("b", eager=0.5, compile_=0.25),       # slower than eager: counts 1.0
        row("c", correct=False),                  # no correct kernel: counts 1.0
        row("d", eager=100.0, compile_=100.0, degenerate=True),  # excluded everywhere
        row("e", correct=False, degenerate=None),  # unknown degeneracy: counted
    ]
    agg = bb.aggregate(rows)
    l2 = agg["levels"]["level2"]
    assert l2["tasks"] == 4 and l2["correct"] == 2
    assert l2["correct_pct"] == pytest.approx(50.0)
    assert l2["geomean_eager"] == pytest.approx(4.0 ** 0.25)
    assert l2["geomean_compile"] == pytest.approx(2.0 ** 0.25)
    assert agg["degenerate_excluded"] == ["d"]
    assert agg["degenerate_unknown"] == ["e"]
    assert bb.aggregate(rows, compile_baseline=False)["levels"]["level2"]["geomean_compile"] is None


def test_aggregate_reports_the_finished_tasks_apart(bb, capsys):
    rows = [row("a", eager=4.0, compile_=2.0), row("b", correct=False), row("c", correct=False),
            row("d", correct=False)]
    rows[2]["status"] = rows[3]["status"] = "missing"  # the run was cut before c and d
    agg = bb.aggregate(rows)
    l2 = agg["levels"]["level2"]
    assert l2["geomean_eager"] == pytest.approx(4.0 ** 0.25)
    f = l2["finished"]
    assert (f["tasks"], f["correct"]) == (2, 1)
    assert f["geomean_eager"] == pytest.approx(2.0) and f["geomean_compile"] == pytest.approx(2.0 ** 0.5)
    bb.print_aggregates(agg, {"cuda": True})
    assert "the 2 tasks the run finished: correct 1/2, geomean vs eager 2.000x" in capsys.readouterr().out


def test_aggregate_level1_bandwidth(bb):
    rows = [
        row("19_ReLU", "level1", eager=1.1, category="elementwise", frac=0.9),
        row("23_Softmax", "level1", eager=1.0, category="softmax", frac=0.5),
        row("47_Sum", "level1", eager=2.0, category="reduction", frac=0.85),
        row("94_MSELoss", "level1", correct=False, category="loss"),
        row("20_Zero", "level1", eager=9.0, category="elementwise", frac=0.1, degenerate=True),
        row("1_Matmul", "level1", eager=1.0, category="matmul"),
    ]
    m = bb.aggregate(rows)["level1_memory_bound"]
    assert (m["tasks"], m["correct"]) == (4, 3)
    assert m["correct_pct"] == pytest.approx(75.0)
    assert m["median_fraction"] == pytest.approx(0.85)
    assert m["min_fraction"] == pytest.approx(0.5)
    assert m["at_least_0_80"] == 2
    assert m["by_category"]["loss"] == {"tasks": 1, "correct": 0}
    assert m["with_gpu_fraction"] == 0 and m["gpu_at_least_0_80"] == 0
    rows[1]["bw_fraction_gpu"] = 0.82  # the softmax's kernels alone, without its launch overhead
    rows[2]["bw_fraction_gpu"] = 0.79
    rows[4]["bw_fraction_gpu"] = 0.99  # degenerate: excluded
    m = bb.aggregate(rows)["level1_memory_bound"]
    assert (m["with_gpu_fraction"], m["gpu_at_least_0_80"]) == (2, 1)
    assert m["min_gpu_fraction"] == pytest.approx(0.79) and m["median_gpu_fraction"] == pytest.approx(0.805)


def test_geomean_and_clamp(bb):
    assert bb.geomean([]) is None
    assert bb.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert bb.clamped_speedup({"correct": True, "speedup_eager": 0.3}, "speedup_eager") == 1.0
    assert bb.clamped_speedup({"correct": False, "speedup_eager": 3.0}, "speedup_eager") == 1.0
    assert bb.clamped_speedup({"correct": True, "speedup_eager": 3.0}, "speedup_eager") == 3.0


TINY_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features, features))  # not counted
    def forward(self, x, idx, n):
        return torch.relu(x).sum(dim=1), idx * 2

def get_inputs():
    return [torch.rand(8, 16, dtype=torch.float16), torch.randint(0, 4, (5,)), 3]

def get_init_inputs():
    return [1024]
"""


def test_estimate_bytes_on_meta(bb, tmp_path):
    f = tmp_path / "level1" / "19_Tiny.py"
    f.parent.mkdir()
    f.write_text(TINY_TASK)
    bytes_in, bytes_out, err = bb.estimate_bytes(f)
    assert err == ""
    assert bytes_in == 8 * 16 * 2 + 5 * 8
    assert bytes_out == 8 * 2 + 5 * 8
    assert bb.level_of(f) == "level1"


def test_estimate_bytes_forward_not_on_meta(bb, tmp_path):
    f = tmp_path / "t.py"
    f.write_text(TINY_TASK.replace("return torch.relu(x).sum(dim=1), idx * 2", "return x * x.sum().item()"))
    bytes_in, bytes_out, err = bb.estimate_bytes(f)
    assert bytes_in == 8 * 16 * 2 + 5 * 8
    assert bytes_out is None and "meta" in err
    assert bb.output_bytes_from_shapes([{"shape": [8, 16], "dtype": "float16"}, {"shape": [], "dtype": "float32"}]) \
        == 8 * 16 * 2 + 4


def test_bandwidth_fraction(bb):
    r = {"bytes": 2e9, "runtime_ms": 1.0, "memory_bound": True}
    bb.add_bandwidth(r, 4e12)
    assert r["achieved_gbs"] == pytest.approx(2000.0)
    assert r["bw_fraction"] == pytest.approx(0.5)
    assert r["bw_fraction_gpu"] is None  # no GPU span: no GPU fraction
    r = {"bytes": 2e9, "runtime_ms": 1.0, "gpu_span_ms": 0.9, "gpu_busy_ms": 0.8, "memory_bound": True}
    bb.add_bandwidth(r, 4e12)
    assert r["bw_fraction"] == pytest.approx(0.5) and r["bw_fraction_gpu"] == pytest.approx(0.625)
    assert "gpu 0.62" in bb.format_row(dict(r, task="x", category="loss", correct=True))
    r = {"bytes": 2e9, "runtime_ms": 1.0, "gpu_busy_ms": 0.8, "memory_bound": False}
    assert bb.add_bandwidth(r, 4e12)["bw_fraction"] is None and r["bw_fraction_gpu"] is None
    assert bb.add_bandwidth({"bytes": 1, "runtime_ms": None, "memory_bound": True}, 4e12)["bw_fraction"] is None


SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE verdicts (task TEXT NOT NULL, cand_hash TEXT NOT NULL, verdict TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE trees (task TEXT PRIMARY KEY, tree TEXT NOT NULL, updated REAL NOT NULL);
CREATE TABLE tasks (task TEXT PRIMARY KEY, status TEXT NOT NULL, summary TEXT NOT NULL, updated REAL NOT NULL);
"""


def node(i, status, error="", correct=False, reward=0.0, speedup=0.0):
    return {"id": i, "kind": "root" if i == 0 else "large", "reward": reward,
            "outcome": {"status": status, "error": error, "correct": correct, "speedup": speedup}}


def test_rows_from_a_run_folder(bb, tmp_path):
    """summary.json first, then run.sqlite; a task in neither is 'no result'."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"tasks": [
        {"task": "19_ReLU", "status": "found", "best_node": 2, "runtime_ms": 0.5, "speedup": {"eager": 1.2,
         "compile": 0.9}, "baseline_ms": {"eager": 0.6, "compile": 0.45}, "flags": [], "device": "NVIDIA H200",
         "best_verdict": {"runtime_ms": 0.5, "gpu_span_ms": 0.4, "gpu_busy_ms": 0.3}},
        {"task": "23_Softmax", "status": "none", "best_node": -1, "steps": 3},
        {"task": "7_DataDep", "status": "stopped: cannot trace: TraceError: control flow", "best_node": -1},
        {"task": "20_Zero", "status": "found", "best_node": 1, "runtime_ms": 0.1, "speedup": {"eager": 5.0},
         "flags": ["degenerate_task", "degenerate:zero_output_passes"]},
    ]}))
    con = sqlite3.connect(out / "run.sqlite")
    con.executescript(SCHEMA)
    tree = {"nodes": [node(0, ""), node(1, "no_candidate", "builtin: nothing to fuse: every operator stays"),
                      node(2, "no_candidate", "builtin: every plan has been proposed")]}
    con.execute("INSERT INTO trees VALUES (?, ?, 0)", ("23_Softmax", json.dumps(tree)))
    tree = {"nodes": [node(0, ""), node(1, "compile_error", "Traceback (most recent call last):\n  x\nNameError: y", reward=0.0),
                      node(2, "mismatch", "max abs error 3.2 > 1e-5\nmore", reward=0.1)]}
    con.execute("INSERT INTO trees VALUES (?, ?, 0)", ("36_RMSNorm", json.dumps(tree)))
    con.execute("INSERT INTO tasks VALUES (?, ?, ?, 0)", ("36_RMSNorm", "none", json.dumps(
        {"task": "36_RMSNorm", "status": "none", "best_node": -1})))
    con.execute("INSERT INTO verdicts VALUES (?, ?, ?, 0)", ("36_RMSNorm", "h", json.dumps(
        {"status": "mismatch", "task": {"degenerate": [], "outputs": [{"shape": [4], "dtype": "float32"}]},
         "env": {"torch": "2.9.0", "triton": "3.5.0"}, "baseline_ms": {"eager": 1.0}})))
    con.commit()
    con.close()

    summary = bb.read_summary(out)
    store, _ = bb.read_store(out)
    rows = {n: bb.task_row(n, tmp_path / "level1" / (n + ".py"), summary.get(n), store.get(n))
            for n in ["19_ReLU", "23_Softmax", "7_DataDep", "20_Zero", "36_RMSNorm", "40_LayerNorm"]}
    r = rows["19_ReLU"]
    assert r["correct"] and r["speedup_eager"] == 1.2 and r["speedup_compile"] == 0.9 and r["level"] == "level1"
    assert r["degenerate"] is False and r["source"] == "summary.json" and r["gpu_span_ms"] == 0.4
    assert r["gpu_busy_ms"] == 0.3
    assert rows["20_Zero"]["gpu_busy_ms"] is None  # an older verdict without GPU times
    assert rows["23_Softmax"]["reason"] == "nothing to fuse: every operator stays"
    assert rows["23_Softmax"]["degenerate"] is None
    assert rows["7_DataDep"]["reason"] == "cannot trace: TraceError: control flow"
    assert rows["20_Zero"]["degenerate"] is True and rows["20_Zero"]["degenerate_kinds"] == ["zero_output_passes"]
    r = rows["36_RMSNorm"]
    assert r["source"] == "run.sqlite" and not r["correct"]
    assert r["reason"] == "mismatch: max abs error 3.2 > 1e-5"
    assert r["degenerate"] is False and r["baseline_eager_ms"] == 1.0
    assert r["_verdict_outputs"] == [{"shape": [4], "dtype": "float32"}]
    assert rows["40_LayerNorm"]["reason"] == "no result (run cut short?)"
    assert not rows["40_LayerNorm"]["correct"]
    info = bb.env_info(store, list(rows.values()), "cpu")
    assert info["torch"] == "2.9.0" and info["triton"] == "3.5.0"
    # Every row prints on one line.
    for r in rows.values():
        assert "\n" not in bb.format_row(r)


def test_first_line(bb):
    assert bb.first_line("Traceback (most recent call last):\n  File x\nValueError: bad") == "ValueError: bad"
    assert bb.first_line("\n\nfirst\nsecond") == "first"
    assert bb.first_line("") == ""
    assert len(bb.first_line("x" * 500)) == 200


def test_resolve_spec_and_merge(bb, tmp_path):
    for lv, names in [("level1", ["2_B.py", "10_C.py", "_skip.py"]), ("level2", ["1_A.py"])]:
        (tmp_path / lv).mkdir()
        for n in names:
            (tmp_path / lv / n).write_text("x")
    assert [f.name for f in bb.resolve_spec(str(tmp_path / "level1"))] == ["2_B.py", "10_C.py"]
    assert [f.name for f in bb.resolve_spec(str(tmp_path / "level1" / "10"))] == ["10_C.py"]
    assert [f.name for f in bb.resolve_spec("kernelbench:%s:2:1" % tmp_path)] == ["1_A.py"]
    out = tmp_path / "out"
    spec, files = bb.prepare_tasks([str(tmp_path / "level1"), str(tmp_path / "level2")], out)
    assert spec == str(out / "_tasks")
    assert sorted(p.name for p in (out / "_tasks").glob("*.py")) == ["10_C.py", "1_A.py", "2_B.py"]
    assert {bb.level_of(out / "_tasks" / "1_A.py"), bb.level_of(out / "_tasks" / "2_B.py")} == {"level1", "level2"}
    assert len(files) == 3
    spec, _ = bb.prepare_tasks([str(tmp_path / "level1")], out)
    assert spec == str(tmp_path / "level1")
    (tmp_path / "level2" / "2_B.py").write_text("y")
    with pytest.raises(SystemExit):
        bb.prepare_tasks([str(tmp_path / "level1"), str(tmp_path / "level2")], out)


def test_only_selects_categories(bb, tmp_path):
    (tmp_path / "level1").mkdir()
    for n in ["19_ReLU.py", "1_Square_matrix_multiplication_.py", "33_BatchNorm.py", "41_Max_Pooling_1D.py"]:
        (tmp_path / "level1" / n).write_text("x")
    out = tmp_path / "out"
    spec, files = bb.prepare_tasks([str(tmp_path / "level1")], out, bb.parse_only("memory-bound,pooling"))
    assert spec == str(out / "_tasks")
    assert sorted(f.name for f in files) == ["19_ReLU.py", "33_BatchNorm.py", "41_Max_Pooling_1D.py"]
    assert sorted(p.name for p in (out / "_tasks").glob("*.py")) == sorted(f.name for f in files)
    assert bb.level_of(out / "_tasks" / "19_ReLU.py") == "level1"
    assert bb.parse_only("memory-bound") == set(bb.MEMORY_BOUND)
    with pytest.raises(SystemExit):
        bb.parse_only("convolutions")
    with pytest.raises(SystemExit):
        bb.prepare_tasks([str(tmp_path / "level1")], out, {"scan"})


def test_checkpoint_folds_the_write_ahead_log(bb, tmp_path):
    """A writer killed without closing leaves its rows in run.sqlite-wal; after checkpoint_store
    a copy of run.sqlite alone holds them."""
    import shutil
    import subprocess
    import sqlite3
    import sys

    db = tmp_path / "run.sqlite"
    code = ("import os, sqlite3, sys\n"
            "con = sqlite3.connect(sys.argv[1])\n"
            "con.execute('PRAGMA journal_mode=WAL')\n"
            "con.execute('PRAGMA wal_autocheckpoint=0')\n"
            "con.execute('CREATE TABLE t (x INTEGER)')\n"
            "con.executemany('INSERT INTO t VALUES (?)', [(i,) for i in range(100)])\n"
            "con.commit()\n"
            "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(db)], check=True)
    assert (tmp_path / "run.sqlite-wal").exists() and (tmp_path / "run.sqlite-wal").stat().st_size > 0

    def rows_in_copy(name):
        d = tmp_path / name
        d.mkdir()
        shutil.copy(db, d / "run.sqlite")
        con = sqlite3.connect(str(d / "run.sqlite"))
        try:
            return con.execute("SELECT count(*) FROM t").fetchone()[0]
        except sqlite3.Error:
            return None
        finally:
            con.close()

    assert rows_in_copy("before") is None  # the table itself is still in the log
    assert bb.checkpoint_store(tmp_path)
    assert rows_in_copy("after") == 100
    assert bb.checkpoint_store(tmp_path / "absent")


def test_store_newer_than_summary_wins(bb, tmp_path):
    """A resumed run cut short leaves the earlier summary.json; the store's newer task result wins."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"tasks": [
        {"task": "19_ReLU", "status": "found", "best_node": 1, "runtime_ms": 2.0, "speedup": {"eager": 1.0}}]}))
    con = sqlite3.connect(out / "run.sqlite")
    con.executescript(SCHEMA)
    con.execute("INSERT INTO tasks VALUES (?, ?, ?, ?)", ("19_ReLU", "found", json.dumps(
        {"task": "19_ReLU", "status": "found", "best_node": 4, "runtime_ms": 1.0, "speedup": {"eager": 2.0}}),
        (out / "summary.json").stat().st_mtime + 100))
    con.commit()
    con.close()
    summary = bb.read_summary(out)
    store, _ = bb.read_store(out)
    r = bb.task_row("19_ReLU", tmp_path / "19_ReLU.py", summary.get("19_ReLU"), store.get("19_ReLU"))
    assert r["source"] == "run.sqlite" and r["runtime_ms"] == 1.0 and r["speedup_eager"] == 2.0


def test_main_report_only(bb, tmp_path, capsys):
    """--report-only over a run folder: one line per task, the aggregates, the JSON lines file."""
    (tmp_path / "level1").mkdir()
    task = tmp_path / "level1" / "19_ReLU.py"
    task.write_text(TINY_TASK.replace("torch.relu(x).sum(dim=1), idx * 2", "torch.relu(x)"))
    (tmp_path / "level1" / "23_Softmax.py").write_text(TINY_TASK)
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"tasks": [
        {"task": "19_ReLU", "status": "found", "best_node": 1, "runtime_ms": 0.001, "speedup": {"eager": 3.0},
         "flags": [], "device": "cpu"}]}))
    rc = bb.main([str(tmp_path / "level1"), "--out", str(out), "--device", "cpu", "--report-only",
                  "--no-degenerate-check", "--bin", str(tmp_path / "none")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "no result (run cut short?)" in text
    assert "level1   correct 1/2 = 50.0%" in text and "vs eager 1.732x" in text
    rows = [json.loads(l) for l in (out / "bench_builtin.jsonl").read_text().splitlines()]
    assert [r["task"] for r in rows] == ["19_ReLU", "23_Softmax"]
    assert rows[0]["bytes"] == 2 * 8 * 16 * 2 + 5 * 8 and rows[0]["bw_fraction"] is None
    agg = json.loads((out / "bench_builtin_summary.json").read_text())
    assert agg["aggregates"]["level1_memory_bound"]["correct"] == 1


def test_why_not_names_the_re_timing_failures(bb):
    tree = {"nodes": [{"id": 0, "kind": "root"},
                      {"id": 1, "kind": "large", "reward": 0.5, "outcome": {"correct": True, "status": "ok"}}]}
    summary = {"status": "none", "retime_failures": [{"node": 1, "reason": "mismatch: output 0 differs\nmore"}]}
    why = bb.why_not(summary, tree)
    assert "none passed the final re-timing (node 1: mismatch: output 0 differs)" in why
    assert bb.why_not({"status": "none"}, tree).endswith("none passed the final re-timing")


def _profiled(kernels, bound="compute", flops_fraction=0.3, tflops=15.0):
    busy = sum(ms for _, ms in kernels)
    return {"busy_ms": busy,
            "kernels": [{"name": n, "ms": ms, "share": ms / busy, "launches": 1} for n, ms in kernels],
            "roofline": {"bound": bound, "flops_fraction": flops_fraction, "tflops": tflops, "peak_tflops": 50.0,
                         "bandwidth_fraction": 0.2, "gbps": 800.0, "peak_gbps": 4000.0}}


def test_roofline_and_why_a_convolution_loses(bb, tmp_path, capsys):
    """GEMM/conv rows carry the best verdict's roofline; one slower than torch.compile says why."""
    def summary(name, kernels, compile_speedup, **roof):
        return {"task": name, "status": "found", "best_node": 1, "runtime_ms": 1.0,
                "speedup": {"eager": 1.2, "compile": compile_speedup},
                "best_verdict": {"gpu_busy_ms": 1.0, "profile": _profiled(kernels, **roof)}}
    lib = bb.task_row("63_Conv2d_ReLU", tmp_path / "level2" / "63_Conv2d_ReLU.py",
                      summary("63_Conv2d_ReLU", [("sm90_xmma_fprop_implicit_gemm", 0.7), ("_ax_k0_kernel", 0.3)], 0.8),
                      None)
    assert lib["roofline"]["generated_share"] == pytest.approx(0.3)
    assert lib["roofline"]["top_library_kernel"] == "sm90_xmma_fprop_implicit_gemm"
    assert "70% of its GPU time is in library kernels" in lib["loses_because"]
    assert "sm90_xmma_fprop_implicit_gemm" in lib["loses_because"]
    line = bb.format_row(lib)
    assert "mm 0.30 (15.0 TFLOP/s)" in line and "gen 30%" in line and "slower: " in line
    gen = bb.task_row("12_Gemm_Add", tmp_path / "level2" / "12_Gemm_Add.py",
                      summary("12_Gemm_Add", [("_ax_gemm0_kernel", 1.0)], 0.9, flops_fraction=0.42), None)
    assert gen["loses_because"] == "compute-bound at 0.42 of the fp32-accurate matmul peak (50 TFLOP/s)"
    fast = bb.task_row("13_Gemm_Relu", tmp_path / "level2" / "13_Gemm_Relu.py",
                       summary("13_Gemm_Relu", [("_ax_gemm0_kernel", 1.0)], 1.4, flops_fraction=0.6), None)
    assert fast["loses_because"] == ""
    for r in (lib, gen, fast):
        r["degenerate"] = False
    agg = bb.aggregate([lib, gen, fast])
    assert agg["matmul_roofline"]["with_profile"] == 3
    assert agg["matmul_roofline"]["median_flops_fraction"] == pytest.approx(0.42)
    assert [s["task"] for s in agg["matmul_roofline"]["slower"]] == ["63_Conv2d_ReLU", "12_Gemm_Add"]
    # The share of GPU time in generated kernels, per level: 0.3, 1.0 and 1.0.
    assert agg["generated_share"]["level2"] == {"with_profile": 3, "median": pytest.approx(1.0), "at_least_0_70": 2}
    bb.print_aggregates(agg, {})
    assert "share of GPU time in generated kernels over 3 profiled: median 1.00, >= 0.70: 2/3" in capsys.readouterr().out


def test_generated_convolutions_against_the_cudnn_plans(bb, tmp_path):
    """A search that judged plans with and without generated convolutions: the row compares the
    fastest correct of each, and the aggregate lists the tasks where cuDNN stays faster."""
    def node(i, conv, ms, correct=True):
        plan = {"v": 1, "gemm": [[64, 64, 32, 8, 4, 3]], "conv": True} if conv else {"v": 1}
        return {"id": i, "kind": "large", "plan": plan,
                "outcome": {"correct": correct, "runtime_ms": ms, "status": "correct" if correct else "mismatch"}}
    summary = {"task": "1_Conv2d_ReLU", "status": "found", "best_node": 2, "runtime_ms": 2.0,
               "speedup": {"eager": 1.1, "compile": 1.0}}
    tree = {"nodes": [{"id": 0, "kind": "root"}, node(1, True, 4.0), node(2, False, 2.0), node(3, True, 1.0, False)]}
    lose = bb.task_row("1_Conv2d_ReLU", tmp_path / "level2" / "1_Conv2d_ReLU.py", summary, {"tree": tree})
    assert lose["conv_vs_cudnn"] == {"generated_ms": 4.0, "cudnn_ms": 2.0, "ratio": 0.5}
    assert "conv generated 4 ms vs cuDNN plans 2 ms (0.50x)" in bb.format_row(lose)
    tree2 = {"nodes": [node(1, True, 1.0), node(2, False, 3.0)]}
    win = bb.task_row("2_Conv3d", tmp_path / "level2" / "2_Conv3d.py", dict(summary, task="2_Conv3d"), {"tree": tree2})
    assert win["conv_vs_cudnn"]["ratio"] == pytest.approx(3.0)
    only = bb.task_row("3_Conv", tmp_path / "level2" / "3_Conv.py", dict(summary, task="3_Conv"),
                       {"tree": {"nodes": [node(1, False, 1.0)]}})
    assert only["conv_vs_cudnn"] is None
    for r in (lose, win, only):
        r["degenerate"] = False
    agg = bb.aggregate([lose, win, only])["conv_vs_cudnn"]
    assert agg["tasks"] == 2 and agg["faster"] == 1
    assert agg["geomean_ratio"] == pytest.approx(math.sqrt(1.5))
    assert agg["lose"] == [{"task": "1_Conv2d_ReLU", "ratio": 0.5}]


def test_why_a_generated_convolution_loses_to_cudnn(bb, tmp_path, capsys):
    """Where both candidates were profiled (outcome.kernels), the comparison says whether the
    convolution kernel itself or the rest of the generated candidate is slower."""
    def node(i, conv, ms, kernels):
        plan = {"v": 1, "gemm": [[64, 64, 32, 8, 4, 3]], "conv": True} if conv else {"v": 1}
        return {"id": i, "kind": "large", "plan": plan,
                "outcome": {"correct": True, "runtime_ms": ms, "status": "ok", "kernels": kernels}}
    summary = {"task": "1_Conv2d_ReLU", "status": "found", "best_node": 2, "runtime_ms": 2.0,
               "speedup": {"eager": 1.1, "compile": 1.0}}
    slow_kernel = {"nodes": [node(1, True, 4.0, [["_ax_gemm_kernel0", 3.5], ["elementwise_kernel", 0.4]]),
                             node(2, False, 2.0, [["sm90_xmma_fprop_implicit_gemm_f32", 1.6], ["_ax_kernel0", 0.3]])]}
    r = bb.task_row("1_Conv2d_ReLU", tmp_path / "level2" / "1_Conv2d_ReLU.py", summary, {"tree": slow_kernel})
    assert r["conv_vs_cudnn"]["why"] == "its convolution kernels take 3.5 ms against cuDNN's 1.6 ms"
    slow_copy = {"nodes": [node(1, True, 2.5, [["_ax_gemm_kernel0", 1.2], ["elementwise_kernel", 1.2]]),
                           node(2, False, 2.0, [["cudnn_conv_kernel", 1.6], ["_ax_kernel0", 0.3]])]}
    r2 = bb.task_row("2_Conv", tmp_path / "level2" / "2_Conv.py", dict(summary, task="2_Conv"), {"tree": slow_copy})
    assert r2["conv_vs_cudnn"]["why"] == "its other kernels (layout copies, epilogues) take 1.2 ms against 0.3 ms"
    unprofiled = {"nodes": [node(1, True, 4.0, []), node(2, False, 2.0, [])]}
    r3 = bb.task_row("3_Conv", tmp_path / "level2" / "3_Conv.py", dict(summary, task="3_Conv"), {"tree": unprofiled})
    assert "why" not in r3["conv_vs_cudnn"]
    for x in (r, r2, r3):
        x["degenerate"] = False
    bb.print_aggregates(bb.aggregate([r, r2, r3]), {})
    assert "loses to cuDNN: 1_Conv2d_ReLU (0.50x): its convolution kernels take 3.5 ms" in capsys.readouterr().out


def test_the_graphed_forward_against_the_launched_plans(bb, tmp_path, capsys):
    """Where the search judged plans replayed from a CUDA graph and plans launched kernel by
    kernel, the row compares the fastest correct candidate of each and the aggregates their
    geomean; a search with only one kind has none."""
    def node(i, graph, ms, correct=True):
        plan = {"v": 1, "graph": True} if graph else {"v": 1}
        return {"id": i, "kind": "large", "plan": plan, "outcome": {"correct": correct, "runtime_ms": ms}}
    summary = {"task": "9_ResNet18", "status": "found", "best_node": 2, "runtime_ms": 1.0,
               "speedup": {"eager": 2.0, "compile": 1.5}}
    tree = {"nodes": [{"id": 0, "kind": "root"}, node(1, False, 3.0), node(2, True, 1.0), node(3, True, 0.5, False)]}
    win = bb.task_row("9_ResNet18", tmp_path / "level3" / "9_ResNet18.py", summary, {"tree": tree})
    assert win["graph_vs_launches"] == {"graph_ms": 1.0, "launched_ms": 3.0, "ratio": 3.0}
    assert "CUDA graph 1 ms vs launched 3 ms (3.00x)" in bb.format_row(win)
    none = bb.task_row("1_MLP", tmp_path / "level3" / "1_MLP.py", dict(summary, task="1_MLP"),
                       {"tree": {"nodes": [node(1, False, 1.0)]}})
    assert none["graph_vs_launches"] is None
    for r in (win, none):
        r["degenerate"] = False
    agg = bb.aggregate([win, none])
    assert agg["graph_vs_launches"] == {"tasks": 1, "geomean_ratio": pytest.approx(3.0), "faster": 1}
    bb.print_aggregates(agg, {})
    assert "the forward from a CUDA graph vs launched kernel by kernel in the same search (launched time / graph " \
           "time): 1 tasks, geomean 3.00x, faster on 1" in capsys.readouterr().out


def test_norm_statistics_in_the_convolution_against_their_own_kernel(bb, tmp_path, capsys):
    """Among generated convolutions, the fastest correct candidate computing the norm's statistics
    in the convolution's kernel against the fastest without; cuDNN plans do not count."""
    def node(i, plan, ms):
        return {"id": i, "kind": "large", "plan": dict(plan, v=1), "outcome": {"correct": True, "runtime_ms": ms}}
    summary = {"task": "17_Conv2d_InstanceNorm_Divide", "status": "found", "best_node": 2, "runtime_ms": 1.0,
               "speedup": {"eager": 2.0, "compile": 1.5}}
    tree = {"nodes": [{"id": 0, "kind": "root"}, node(1, {}, 0.5), node(2, {"conv": True, "convstats": True}, 1.0),
                      node(3, {"conv": True}, 1.5), node(4, {"conv": True}, 1.2)]}
    r = bb.task_row("17_Conv2d_InstanceNorm_Divide", tmp_path / "level2" / "17_Conv2d_InstanceNorm_Divide.py",
                    summary, {"tree": tree})
    assert r["stats_vs_separate"] == {"fused_ms": 1.0, "separate_ms": 1.2, "ratio": pytest.approx(1.2)}
    assert "norm statistics in the conv kernel 1 ms vs separate 1.2 ms (1.20x)" in bb.format_row(r)
    only = bb.task_row("1_Conv", tmp_path / "level2" / "1_Conv.py", dict(summary, task="1_Conv"),
                       {"tree": {"nodes": [node(1, {"conv": True}, 1.0), node(2, {}, 0.9)]}})
    assert only["stats_vs_separate"] is None
    for x in (r, only):
        x["degenerate"] = False
    agg = bb.aggregate([r, only])
    assert agg["stats_vs_separate"] == {"tasks": 1, "geomean_ratio": pytest.approx(1.2), "faster": 1}
    bb.print_aggregates(agg, {})
    assert "(separate time / fused time): 1 tasks, geomean 1.20x, faster on 1" in capsys.readouterr().out

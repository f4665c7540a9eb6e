"""bench/rmsnorm.py on the CPU, without a GPU or the adaexplore binary: the task files it writes
(valid KernelBench tasks whose Model matches F.rms_norm), the shape grid, the byte count, the
speedups and their geometric means, the goals, finding the best kernel of a run folder (best.py,
else the run store's best node), the float64 check, and --help."""

import importlib.util
import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "rmsnorm.py"

# A hand-written Triton RMSNorm in the form of a found kernel (ModelNew with the task's signature).
STANDIN = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, 0) / N + eps)
    tl.store(y_ptr + row * N + offs, (x * r * w).to(y_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.hidden = hidden
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(hidden) * 0.5 + 0.75)

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.shape[-1]
        _rms[(x.numel() // n,)](x, self.weight, y, n, self.eps, BLOCK=triton.next_power_of_2(n))
        return y
'''


@pytest.fixture(scope="module")
def rb():
    spec = importlib.util.spec_from_file_location("bench_rmsnorm", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_script_loads_without_torch():
    # torch is imported inside the functions that need it: the pure parts and --help work without it
    code = ("import sys, importlib.util; sys.modules['torch'] = None; "
            "spec = importlib.util.spec_from_file_location('b', %r); m = importlib.util.module_from_spec(spec); "
            "spec.loader.exec_module(m); print(m.bytes_moved(2, 3, 4), len(m.shape_grid()))" % str(SCRIPT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["60", "30"]


def test_shape_grid(rb):
    g = rb.shape_grid()
    assert len(g) == 30
    assert g[0] == (1, 2048) and g[-1] == (32768, 16384)
    assert set(t for t, _ in g) == {1, 16, 128, 1024, 8192, 32768}
    assert set(h for _, h in g) == {2048, 4096, 5120, 8192, 16384}
    assert len(set(g)) == 30
    assert rb.shape_grid([16, 1], [4096]) == [(16, 4096), (1, 4096)]
    assert rb.parse_list("1, 16,,16,128") == [1, 16, 128]
    assert rb.parse_dtypes("fp32,bf16") == ["fp32", "bf16"]
    with pytest.raises(SystemExit):
        rb.parse_dtypes("fp8")
    with pytest.raises(SystemExit):
        rb.parse_list("1,x")
    with pytest.raises(SystemExit):
        rb.parse_impls("eager,triton")
    assert rb.task_name(1024, 4096) == "rmsnorm_t1024_h4096"


def test_bytes_moved(rb):
    # input read + output written + weight read
    assert rb.bytes_moved(1024, 4096, 4) == 2 * 1024 * 4096 * 4 + 4096 * 4
    assert rb.bytes_moved(1, 2048, 2) == 2 * 2048 * 2 + 2048 * 2
    assert rb.bytes_moved(32768, 16384, 2) == 2 * 32768 * 16384 * 2 + 16384 * 2
    assert rb.ELEM_SIZE["bf16"] == 2 and rb.ELEM_SIZE["fp32"] == 4


def test_geomean_and_speedup(rb):
    assert rb.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert rb.geomean([1.5]) == pytest.approx(1.5)
    assert rb.geomean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    assert rb.geomean([]) is None
    assert rb.geomean([None, 4.0]) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        rb.geomean([1.0, 0.0])
    assert rb.speedup(30.0, 10.0) == pytest.approx(3.0)  # other / builtin: > 1 means the builtin is faster
    assert rb.speedup(None, 10.0) is None and rb.speedup(10.0, None) is None


def _row(rb, dtype, t, h, times, correct=None):
    r = {"dtype": dtype, "tokens": t, "hidden": h, "task": rb.task_name(t, h), "bytes": rb.bytes_moved(t, h, 2),
         "time_us": dict(times), "correct": {k: True for k in times}, "error": {},
         "bw_fraction": {k: rb.bytes_moved(t, h, 2) / (v / 1e6) / 4e12 for k, v in times.items()}}
    r["correct"].update(correct or {})
    return rb.fill_ratios(r)


def test_ratios_and_goals(rb):
    rows = [
        # builtin faster than both everywhere; the large shape at copy speed
        _row(rb, "bf16", 16, 4096, {"eager": 10.0, "compile": 8.0, "flashinfer": 6.0, "builtin": 4.0}),
        _row(rb, "bf16", 1024, 4096, {"eager": 30.0, "compile": 12.0, "flashinfer": 9.0,
                                     "builtin": rb.bytes_moved(1024, 4096, 2) / 4e12 * 1e6}),
    ]
    assert rows[0]["speedup_vs_flashinfer"] == pytest.approx(1.5)
    assert rows[0]["speedup_vs_compile"] == pytest.approx(2.0)
    s = rb.summarise(rows)["bf16"]
    assert s["n_vs_flashinfer"] == 2 and s["n_vs_compile"] == 2
    assert s["geomean_vs_flashinfer"] == pytest.approx(math.sqrt(1.5 * rows[1]["speedup_vs_flashinfer"]))
    assert all(v is True for v in s["goals"].values()), s["goals"]

    # a shape where FlashInfer wins, and a wrong builtin kernel on a large shape
    rows.append(_row(rb, "bf16", 8192, 2048, {"flashinfer": 5.0, "compile": 5.0, "builtin": 6.0}))
    rows.append(_row(rb, "bf16", 32768, 2048, {"flashinfer": 50.0, "compile": 60.0, "builtin": 40.0},
                     correct={"builtin": False}))
    assert rows[-1]["speedup_vs_flashinfer"] is None  # a wrong kernel has no speedup
    s = rb.summarise(rows)["bf16"]
    g = s["goals"]
    assert g["builtin_correct_every_shape"] is False and s["without_correct_builtin"] == ["rmsnorm_t32768_h2048"]
    assert g["builtin_ge_flashinfer_every_shape"] is False
    assert s["builtin_not_ge_flashinfer"] == ["rmsnorm_t8192_h2048", "rmsnorm_t32768_h2048"]
    assert g["bandwidth_large_shapes"] is False and "rmsnorm_t32768_h2048" in s["below_bw_goal"]
    assert s["n_vs_flashinfer"] == 3

    # fp32: FlashInfer did not run (unsupported dtype): its goals are n/a, not missed
    fp32 = _row(rb, "fp32", 16, 4096, {"compile": 12.0, "builtin": 10.0})
    fp32["unsupported"] = True
    fp32["correct"]["flashinfer"] = None
    s = rb.summarise([fp32])["fp32"]
    assert s["goals"]["builtin_ge_flashinfer_every_shape"] is None
    assert s["goals"]["geomean_vs_flashinfer"] is None
    assert s["goals"]["geomean_vs_compile"] is True  # 1.2x
    assert s["goals"]["bandwidth_large_shapes"] is None  # no shape with tokens >= 1024
    assert "n/a" in rb.format_row(fp32)
    lines = rb.goal_lines("fp32", s)
    assert len(lines) == 5 and all(l.startswith("fp32 goal: ") for l in lines)
    # the builtin not timed at all: nothing to judge
    assert set(rb.summarise([fp32], builtin_timed=False)["fp32"]["goals"].values()) == {None}


def test_task_files_are_kernelbench_tasks(rb, tmp_path):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    paths = rb.write_tasks(tmp_path, [(16, 2048), (1, 5120)])
    assert sorted(paths) == ["rmsnorm_t16_h2048", "rmsnorm_t1_h5120"]
    (tmp_path / "rmsnorm_t8_h64.py").write_text("stale")
    (tmp_path / "other.py").write_text("kept")
    rb.write_tasks(tmp_path, [(16, 2048), (1, 5120)])
    assert not (tmp_path / "rmsnorm_t8_h64.py").exists()  # a shape outside the grid goes
    assert (tmp_path / "other.py").exists()
    for name, path in paths.items():
        mod = rb.load_module(path)
        init = mod.get_init_inputs()
        t, h = (int(x) for x in name[len("rmsnorm_t"):].split("_h"))
        assert init == [h, 1e-6]
        torch.manual_seed(0)
        model = mod.Model(*init)
        assert isinstance(model, torch.nn.Module)
        assert [n for n, _ in model.named_parameters()] == ["weight"]
        assert model.weight.shape == (h,)
        w = model.weight.detach()
        assert float(w.min()) >= 0.75 and float(w.max()) <= 1.25
        (x,) = mod.get_inputs()
        assert x.shape == (t, h) and x.dtype == torch.float32
        with torch.no_grad():
            y = model(x)
        ref = F.rms_norm(x, (h,), model.weight, 1e-6)
        assert torch.allclose(y, ref)
        xd = x.double()
        manual = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * model.weight.double()
        assert torch.allclose(y.double(), manual, atol=1e-5, rtol=1e-5)
        ok, err, why = rb.reference_check(y, x, model.weight, 1e-6, rb.TOLERANCE["fp32"])
        assert ok and why == "" and err < 1e-4
        ok, _, why = rb.reference_check(y * 1.01, x, model.weight, 1e-6, rb.TOLERANCE["fp32"])
        assert not ok and "elements off" in why
        ok, _, why = rb.reference_check(y[:, :-1], x, model.weight, 1e-6, 1e-4)
        assert not ok and "shape" in why
        # the bf16 tolerance passes a bf16 result
        xb, wb = x.bfloat16(), model.weight.detach().bfloat16()
        ok, _, _ = rb.reference_check(F.rms_norm(xb, (h,), wb, 1e-6), xb, wb, 1e-6, rb.TOLERANCE["bf16"])
        assert ok


def _fake_run(run_dir, tasks):
    """A run folder as `adaexplore bench` leaves it: summary.json, run.sqlite (tasks, trees; each node's
    source in its tree, as the search stores it)."""
    run_dir.mkdir(parents=True)
    db = sqlite3.connect(run_dir / "run.sqlite")
    db.executescript(
        "CREATE TABLE nodes (task TEXT NOT NULL, id INTEGER NOT NULL, node TEXT NOT NULL, created REAL NOT NULL,"
        " PRIMARY KEY (task, id));"
        "CREATE TABLE trees (task TEXT PRIMARY KEY, tree TEXT NOT NULL, updated REAL NOT NULL);"
        "CREATE TABLE tasks (task TEXT PRIMARY KEY, status TEXT NOT NULL, summary TEXT NOT NULL,"
        " updated REAL NOT NULL);")
    summaries = []
    for name, (best_node, source, note) in tasks.items():
        s = {"task": name, "best_node": best_node, "status": "found" if best_node >= 0 else "none", "steps": 2}
        if best_node >= 0:
            s.update(runtime_ms=0.01, speedup={"eager": 2.0, "compile": 1.5})
        summaries.append(s)
        db.execute("INSERT INTO tasks VALUES (?, ?, ?, 0)", (name, s["status"], json.dumps(s)))
        nodes = [{"id": 0, "kind": "root", "outcome": {}},
                 {"id": 1, "kind": "large", "reward": 0.0, "source": source or "",
                  "outcome": {"correct": best_node >= 0, "status": "no_candidate" if note else "ok",
                              "error": note}}]
        db.execute("INSERT INTO trees VALUES (?, ?, 0)", (name, json.dumps({"nodes": nodes})))
    db.commit()
    db.close()
    (run_dir / "summary.json").write_text(json.dumps({"tasks": summaries, "precision": "bf16"}))


def test_find_best_kernels(rb, tmp_path):
    run = tmp_path / "bf16"
    _fake_run(run, {"rmsnorm_t1_h2048": (1, None, ""),
                    "rmsnorm_t16_h2048": (1, STANDIN, ""),
                    "rmsnorm_t128_h2048": (-1, None, "builtin: nothing to fuse: every operator stays a library call")})
    (run / "rmsnorm_t1_h2048").mkdir()
    (run / "rmsnorm_t1_h2048" / "best.py").write_text(STANDIN)
    found = rb.find_best_kernels(run, ["rmsnorm_t1_h2048", "rmsnorm_t16_h2048", "rmsnorm_t128_h2048",
                                       "rmsnorm_t1024_h2048"])
    assert found["rmsnorm_t1_h2048"]["file"] == str(run / "rmsnorm_t1_h2048" / "best.py")
    assert found["rmsnorm_t1_h2048"]["judge"]["speedup"] == {"eager": 2.0, "compile": 1.5}
    # no best.py: the best node's source from the store
    f = found["rmsnorm_t16_h2048"]["file"]
    assert f and Path(f).read_text() == STANDIN
    assert found["rmsnorm_t128_h2048"]["file"] is None
    assert "nothing to fuse" in found["rmsnorm_t128_h2048"]["why"]
    assert found["rmsnorm_t1024_h2048"]["file"] is None and "no result" in found["rmsnorm_t1024_h2048"]["why"]
    missing = rb.find_best_kernels(tmp_path / "fp32", ["rmsnorm_t1_h2048"])
    assert "no run folder" in missing["rmsnorm_t1_h2048"]["why"]


def test_search_command(rb, tmp_path):
    cmd = rb.search_command("build/adaexplore", "runs/rmsnorm-tasks", "bf16", tmp_path / "bf16", 6, 4, "cuda:0",
                            "--seed 3")
    assert cmd == ["build/adaexplore", "bench", "runs/rmsnorm-tasks", "--proposer", "builtin", "--steps", "6",
                   "--precision", "bf16", "--device", "cuda:0", "--out", str(tmp_path / "bf16"), "--jobs", "4",
                   "--timing", "gpu", "--seed", "3"]
    host = rb.search_command("b", "t", "bf16", tmp_path / "x", 6, 4, "cuda:0", timing="host")
    assert host[host.index("--timing") + 1] == "host"
    (tmp_path / "bf16").mkdir()
    (tmp_path / "bf16" / "run.sqlite").write_bytes(b"")
    assert "--resume" in rb.search_command("b", "t", "bf16", tmp_path / "bf16", 6, 4, "cuda:0")


def test_builtin_kernel_is_built_with_the_reference_weights(rb, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("checks the CPU path (Triton's interpreter)")
    import os
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton's interpreter is off")
    task_path = rb.write_tasks(tmp_path / "tasks", [(4, 2048)])["rmsnorm_t4_h2048"]
    best = tmp_path / "best.py"
    best.write_text(STANDIN)
    task = rb.load_module(task_path)
    ref = rb.build_reference(task, "cpu", torch.float32)
    with torch.no_grad():
        ref.weight.mul_(0.5)  # differs from a seeded construction: the load must carry it over
    model, note = rb.build_builtin(best, task, ref, "cpu", torch.float32)
    assert "loaded" in note
    assert torch.equal(model.weight, ref.weight)
    (x,) = rb.make_inputs(task, 1, "cpu", torch.float32)
    with torch.no_grad():
        y = model(x)
    ok, err, why = rb.reference_check(y, x, ref.weight, rb.EPS, rb.TOLERANCE["fp32"])
    assert ok, why


def test_help_and_tasks_only(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for flag in ("--tokens", "--hidden", "--dtypes", "--tasks-dir", "--no-search", "--steps", "--json", "--bin"):
        assert flag in r.stdout
    # writing the tasks needs no torch
    r = subprocess.run([sys.executable, str(SCRIPT), "--tokens", "1,16", "--hidden", "2048", "--tasks-dir",
                        str(tmp_path / "t"), "--tasks-only"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["rmsnorm_t16_h2048.py", "rmsnorm_t1_h2048.py"]
    r = subprocess.run([sys.executable, str(SCRIPT), "--dtypes", "fp8", "--tasks-dir", str(tmp_path / "u"),
                        "--tasks-only"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "fp8" in r.stderr


def test_search_only_reports_a_failed_search(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--tokens", "1", "--hidden", "2048", "--dtypes", "bf16",
                        "--tasks-dir", str(tmp_path / "t"), "--out", str(tmp_path / "o"), "--bin",
                        str(tmp_path / "no-such-binary"), "--search-only"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "--precision bf16" in r.stdout and "cannot run" in r.stdout


def test_short_error_has_no_control_characters(rb):
    assert rb.short_error(RuntimeError("failed to dispatch data type \x02 32\nsecond line")) == \
        "RuntimeError: failed to dispatch data type ? 32"


def test_without_cuda_it_says_so_and_exits_2(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; this checks the refusal without one")
    r = subprocess.run([sys.executable, str(SCRIPT), "--tokens", "1", "--hidden", "2048", "--tasks-dir",
                        str(tmp_path / "t"), "--no-search"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "no CUDA device" in r.stderr

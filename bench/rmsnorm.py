#!/usr/bin/env python3
"""bench/rmsnorm: the builtin proposer's RMSNorm kernels against eager, torch.compile and FlashInfer.

    python3 bench/rmsnorm.py [--tokens 1,16,128,1024,8192,32768] [--hidden 2048,4096,5120,8192,16384]
                             [--dtypes fp32,bf16] [--tasks-dir runs/rmsnorm-tasks] [--out runs/rmsnorm]
                             [--bin build/adaexplore] [--steps 6] [--jobs 4] [--device cuda:0]
                             [--extra "..."] [--no-search | --search-only] [--tasks-only]
                             [--impls eager,compile,flashinfer,builtin] [--iters 50] [--warmup 10] [--sets 4]
                             [--timing gpu|host] [--both-timings] [--json OUT.json]

LLM-shaped RMSNorm, y = x / sqrt(mean(x^2, -1) + eps) * weight, over x of [tokens, hidden] with a
weight of [hidden] and eps 1e-6, in fp32 and bf16.

1. Writes one KernelBench task per shape into --tasks-dir (rmsnorm_t{T}_h{H}.py; Model(hidden, eps)
   holds the weight, forward is F.rms_norm; get_inputs() is one fp32 randn(T, H)). The dtype is not
   in the task: the judge casts model and inputs with --precision. Other rmsnorm_t*_h*.py files in
   the folder are removed, so that the folder holds exactly the grid.
2. Unless --no-search, per dtype: `BIN bench TASKS_DIR --proposer builtin --steps N --precision DTYPE
   --device D --out OUT/DTYPE --jobs J --timing T` (T: this script's --timing, so that the judge
   ranks 3-50 us kernels on their GPU time rather than on a host figure several times larger;
   plus --resume when OUT/DTYPE holds a run.sqlite). The best
   kernel of a task is OUT/DTYPE/TASK/best.py (a standalone ModelNew file the search writes), else
   the source of the best node of the run store (tasks.summary's best_node -> that node of trees.tree).
   A failed search is reported and the timing goes on with what was stored. --search-only stops
   after the searches (exit 1 when one failed), for timing in a later call with --no-search.
3. Times, in this process on --device, per shape and dtype: eager F.rms_norm; torch.compile of the
   task's Model (default mode, static shapes, dynamo reset per shape, as the judge's baseline runs
   in a fresh process); flashinfer.norm.rmsnorm(x, w, eps) when flashinfer imports (else why not is
   printed once); the builtin's best ModelNew (built under torch.manual_seed(42) on the device in
   the dtype, the reference Model's weights loaded into it when the state dict's names and shapes
   match). Timing: CUDA events around each call, the L2 flushed before it (a write of a 256 MiB
   buffer), --sets input sets used in turn, --warmup untimed calls, the median of --iters timed
   calls. --timing gpu (default): after the flush the GPU spins (torch.cuda._sleep) for twice the
   call's host time (measured in the warm-up) + 20 us, so the call's launches are queued before
   its start event: GPU time, launch overhead hidden for every implementation alike (torch.compile's
   and FlashInfer's Python wrappers cost 10-100 us of host time per call, more than a small
   shape's kernel). --timing host: the host waits for the flush, then starts the events and calls,
   so host overhead up to the last launch counts, as in the judge's timed median. --both-timings
   also records the other one in the JSON. The host time of a call is recorded too (host_call_us).
   Each output is checked against a float64 computation of the same formula on the same (cast)
   input and weight, atol = rtol = 1e-4 for fp32, 1e-2 for bf16 (fp16); a failure is marked `!`.
   FlashInfer's CUDA norm kernel takes fp16/bf16 only: in fp32 it is `n/a` (the reason is printed once).
4. Per shape: each implementation's time (us) and fraction of copy bandwidth (bytes moved =
   2 x tokens x hidden x elem + hidden x elem, over time, over the copy bandwidth: the median of 20
   1 GiB device-to-device copies, counting bytes read and written), and the speedups
   flashinfer_time / builtin_time and compile_time / builtin_time. Per dtype at the end: the
   geometric means of the speedups (over shapes where both sides ran and were correct) and the
   goals: a correct builtin kernel on every shape; builtin >= FlashInfer on every shape; geomean
   >= 1.2x vs FlashInfer; geomean >= 1.1x vs torch.compile; >= 90% of copy bandwidth for tokens >= 1024.

Exit 0 when the harness ran (goals missed or not: they are reported), 1 when it crashed, 2 without a
CUDA device (after writing the tasks) or on bad usage. --json writes every row (times, fractions,
speedups, correctness), the per-dtype summary and the environment (device, torch, triton,
flashinfer versions, copy bandwidth, date).

FlashInfer JIT-compiles its norm module with nvcc on first use (about a minute) into
$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/VERSION/ARCH/cached_ops (default $HOME);
FLASHINFER_CUDA_ARCH_LIST (e.g. "9.0a") fixes the target instead of the visible GPUs' and
FLASHINFER_USE_CUDA_NORM=1 forces the CUDA kernel where nvidia-cutlass-dsl would otherwise be used
(without nvidia-cutlass-dsl installed, FlashInfer 0.7 uses the CUDA kernel anyway). A prebuilt
module at SITE/flashinfer/data/aot/norm/norm.so is loaded instead of building one.
"""

import argparse
import datetime
import importlib.util
import json
import math
import os
import re
import shlex
import sqlite3
import statistics
import subprocess
import sys
import traceback
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TOKENS = (1, 16, 128, 1024, 8192, 32768)
HIDDEN = (2048, 4096, 5120, 8192, 16384)
DTYPES = ("fp32", "bf16")
EPS = 1e-6
IMPLS = ("eager", "compile", "flashinfer", "builtin")
ELEM_SIZE = {"fp32": 4, "fp16": 2, "bf16": 2}
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
INIT_SEED = 42
FLASHINFER_DTYPES = ("fp16", "bf16")
FLUSH_BYTES = 256 << 20

GOAL_VS_FLASHINFER = 1.2
GOAL_VS_COMPILE = 1.1
GOAL_BW_FRACTION = 0.90
GOAL_BW_MIN_TOKENS = 1024

TASK_RE = re.compile(r"^rmsnorm_t(\d+)_h(\d+)\.py$")

TASK_TEMPLATE = '''\
# bench/rmsnorm.py: RMSNorm over [{tokens}, {hidden}] with a weight, eps {eps!r} (generated; the judge
# casts model and inputs to its --precision).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.hidden = hidden
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(hidden) * 0.5 + 0.75)

    def forward(self, x):
        return torch.nn.functional.rms_norm(x, (self.hidden,), self.weight, self.eps)


tokens = {tokens}
hidden = {hidden}


def get_inputs():
    return [torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden, {eps!r}]
'''


# ---------------------------------------------------------------- grid, tasks, arithmetic

def parse_list(text, cast=int, what="value"):
    """"1,16, 128" -> [1, 16, 128] (order kept, duplicates dropped)."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = cast(part)
        except ValueError:
            raise SystemExit("bench/rmsnorm: bad %s %r" % (what, part))
        if v not in out:
            out.append(v)
    if not out:
        raise SystemExit("bench/rmsnorm: no %s given" % what)
    return out


def parse_choices(text, allowed, what):
    xs = parse_list(text, str, what)
    for x in xs:
        if x not in allowed:
            raise SystemExit("bench/rmsnorm: unknown %s %r (%s)" % (what, x, ", ".join(allowed)))
    return xs


def parse_dtypes(text):
    return parse_choices(text, tuple(ELEM_SIZE), "dtype")


def parse_impls(text):
    return parse_choices(text, IMPLS, "implementation")


def shape_grid(tokens=TOKENS, hidden=HIDDEN):
    """[(tokens, hidden), ...]: tokens outer, hidden inner, in the given orders."""
    return [(t, h) for t in tokens for h in hidden]


def task_name(tokens, hidden):
    return "rmsnorm_t%d_h%d" % (tokens, hidden)


def task_source(tokens, hidden, eps=EPS):
    return TASK_TEMPLATE.format(tokens=int(tokens), hidden=int(hidden), eps=float(eps))


def write_tasks(folder, shapes, eps=EPS):
    """Writes one task file per shape into folder (unchanged files are not rewritten) and removes
    other rmsnorm_t*_h*.py there; returns {task name: path}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for t, h in shapes:
        p = folder / (task_name(t, h) + ".py")
        text = task_source(t, h, eps)
        if not p.exists() or p.read_text() != text:
            p.write_text(text)
        paths[p.stem] = p
    for old in folder.glob("rmsnorm_t*_h*.py"):
        if TASK_RE.match(old.name) and old.stem not in paths:
            old.unlink()
    return paths


def bytes_moved(tokens, hidden, elem_size):
    """Input read + output written + weight read once."""
    return 2 * tokens * hidden * elem_size + hidden * elem_size


def geomean(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    if any(x <= 0 for x in xs):
        raise ValueError("geomean of a non-positive value")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def speedup(other_us, builtin_us):
    """other / builtin (>1: the builtin is faster); None when either is missing."""
    if other_us is None or builtin_us is None or builtin_us <= 0:
        return None
    return other_us / builtin_us


def load_module(path, prefix="_bench_rmsnorm"):
    name = "%s_%s" % (prefix, uuid.uuid4().hex)
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # Triton looks modules up by name
    spec.loader.exec_module(mod)
    return mod


def first_line(text, limit=300):
    lines = [l.strip() for l in str(text or "").splitlines() if l.strip()]
    s = lines[0] if lines else ""
    return s if len(s) <= limit else s[:limit - 3] + "..."


def short_error(e):
    """"Type: first line", control characters (FlashInfer prints a dtype code as one) shown as ?."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "?", "%s: %s" % (type(e).__name__, first_line(str(e))))


# ---------------------------------------------------------------- the builtin's run

def search_command(binary, tasks_dir, dtype, out, steps, jobs, device, extra="", timing="gpu"):
    cmd = [str(binary), "bench", str(tasks_dir), "--proposer", "builtin", "--steps", str(steps),
           "--precision", dtype, "--device", device, "--out", str(out), "--jobs", str(jobs), "--timing", timing]
    if (Path(out) / "run.sqlite").exists():
        cmd.append("--resume")
    return cmd + shlex.split(extra)


def run_search(cmd):
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    try:
        rc = subprocess.call(cmd)
    except OSError as e:
        print("bench/rmsnorm: cannot run %s: %s" % (cmd[0], e), flush=True)
        return None
    if rc != 0:
        print("bench/rmsnorm: bench exited %d; timing the kernels it stored" % rc, flush=True)
    return rc


def _store_summaries(run_dir):
    """({task: summary}, {task: tree}, db_path) from run_dir/run.sqlite (empty when absent)."""
    db_path = Path(run_dir) / "run.sqlite"
    if not db_path.exists():
        return {}, {}, None
    db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    try:
        summaries, trees = {}, {}
        for table, into in (("tasks", summaries), ("trees", trees)):
            col = "summary" if table == "tasks" else "tree"
            for task, text in db.execute("SELECT task, %s FROM %s" % (col, table)):
                try:
                    into[task] = json.loads(text)
                except ValueError:
                    pass
        return summaries, trees, db_path
    finally:
        db.close()


def why_no_kernel(summary, tree):
    """Why a task has no correct kernel: a stop reason, else the most promising failed node's
    status and first error line (the builtin's decline, like "nothing to fuse: ...")."""
    status = (summary or {}).get("status") or ""
    nodes = [n for n in (tree or {}).get("nodes", []) if n.get("kind") != "root"]
    parts = [status[len("stopped: "):]] if status.startswith("stopped: ") else []
    if nodes:
        best = max(nodes, key=lambda n: (n.get("reward", 0), -n.get("id", 0)))
        o = best.get("outcome", {})
        err = first_line(o.get("error", ""), 200)
        st = o.get("status") or "?"
        if any(n.get("outcome", {}).get("correct") for n in nodes):
            parts.append("correct candidates, but none passed the final re-timing")
        else:
            parts.append("%s: %s" % (st, err) if err else st)
    if not parts:
        parts.append("no candidate judged (status %s)" % (status or "?"))
    return "no correct kernel: " + "; ".join(parts)


def _tree_node_source(tree, node_id):
    """The source of node node_id in a stored search tree (the trees table holds every node's
    source; the store's nodes table is not written by the search)."""
    for n in (tree or {}).get("nodes", []):
        if n.get("id") == int(node_id):
            return n.get("source") or None
    return None


def find_best_kernels(run_dir, tasks):
    """{task: {"file": path or None, "why": text, "judge": {...}}} for the builtin's run in run_dir:
    TASK/best.py, else the best node's source from the store's search tree (written to TASK/best_from_store.py)."""
    run_dir = Path(run_dir)
    summaries = {}
    sj = run_dir / "summary.json"
    if sj.exists():
        try:
            for t in json.loads(sj.read_text()).get("tasks", []):
                if isinstance(t, dict) and t.get("task"):
                    summaries[t["task"]] = t
        except ValueError:
            pass
    try:
        stored, trees, db_path = _store_summaries(run_dir)
    except sqlite3.Error as e:
        stored, trees, db_path = {}, {}, None
        print("bench/rmsnorm: cannot read %s/run.sqlite: %s" % (run_dir, e), flush=True)
    found = {}
    for task in tasks:
        s = summaries.get(task) or stored.get(task) or {}
        judge = {k: s.get(k) for k in ("status", "best_node", "runtime_ms", "speedup", "baseline_ms", "steps")
                 if k in s}
        entry = {"file": None, "why": "", "judge": judge}
        best = run_dir / task / "best.py"
        if best.is_file():
            entry["file"] = str(best)
        elif db_path is not None and s.get("best_node") is not None and s.get("best_node", -1) >= 0:
            src = _tree_node_source(trees.get(task), s["best_node"])
            if src:
                p = run_dir / task / "best_from_store.py"
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(src)
                entry["file"] = str(p)
        if entry["file"] is None:
            if not run_dir.exists():
                entry["why"] = "no run folder %s" % run_dir
            elif not s:
                entry["why"] = "no result for the task in %s" % run_dir
            else:
                entry["why"] = why_no_kernel(s, trees.get(task))
        found[task] = entry
    return found


# ---------------------------------------------------------------- timing (GPU)

def torch_dtype(name):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def measure_copy_bandwidth(device, gib=1.0):
    """Device-to-device copy bandwidth in bytes/s (bytes read + written over the median time):
    bench/builtin.py's measurement, so that both benchmarks' fractions of copy mean the same."""
    builtin_bench = load_module(Path(__file__).resolve().with_name("builtin.py"), "_bench_builtin")
    return builtin_bench.measure_copy_bandwidth(device, gib)


def sleep_cycles_per_us(device):
    """Clock cycles of torch.cuda._sleep per microsecond on this GPU (measured once)."""
    import torch
    cycles = 2_000_000
    torch.cuda._sleep(cycles // 10)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(cycles)
    b.record()
    b.synchronize()
    return cycles / max(a.elapsed_time(b) * 1e3, 1.0)


def time_calls(fn, inputs, flush, warmup, iters, mode="gpu", cycles_per_us=None):
    """(median, min, host_us) microseconds of fn(inputs[i % len]) between CUDA events, the L2
    flushed (flush.zero_()) before each timed call.

    mode "gpu": after the flush the GPU also spins (torch.cuda._sleep) for twice the call's host
    time (measured over the warm-up) plus 20 us, so that the call's launches are all queued before
    the start event is reached: the time is the GPU's, launch gaps between the call's kernels only
    where the host is slower than them. mode "host": the host waits for the flush, then records
    the start event and calls, so the time also counts the call's host overhead up to its last
    launch (as the judge's timed median does)."""
    import time
    import torch
    n = len(inputs)
    host = []
    with torch.no_grad():
        for i in range(warmup):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn(inputs[i % n])
            host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        late = host[len(host) // 2:]  # the first calls may still look up caches
        host_us = statistics.median(late) if late else None
        spin = None
        if mode == "gpu":
            spin = int(min(2 * max(late) if late else 200.0, 20000.0) + 20) * int(cycles_per_us or 2000)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i in range(iters):
            flush.zero_()
            if spin:
                torch.cuda._sleep(spin)
            else:
                torch.cuda.synchronize()
            starts[i].record()
            fn(inputs[i % n])
            ends[i].record()
        torch.cuda.synchronize()
    times = [a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends)]
    return statistics.median(times), min(times), host_us


def reference_check(out, x, w, eps, tol, rows_per_chunk=2048):
    """(ok, max_abs_err, why): out against float64 x * rsqrt(mean(x^2) + eps) * w, chunked by rows."""
    import torch
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor):
        return False, None, "output is a %s" % type(out).__name__
    if tuple(out.shape) != tuple(x.shape):
        return False, None, "output shape %s, expected %s" % (tuple(out.shape), tuple(x.shape))
    if out.dtype != x.dtype:
        return False, None, "output dtype %s, expected %s" % (out.dtype, x.dtype)
    wd = w.detach().double()
    worst, bad = 0.0, 0
    with torch.no_grad():
        for r in range(0, x.shape[0], rows_per_chunk):
            xd = x[r:r + rows_per_chunk].double()
            ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * wd
            od = out[r:r + rows_per_chunk].double()
            err = (od - ref).abs()
            worst = max(worst, float(torch.nan_to_num(err, nan=float("inf")).max()))
            bad += int((~(err <= tol + tol * ref.abs())).sum())
    if bad:
        return False, worst, "%d elements off by more than atol = rtol = %g (max abs err %.3g)" % (bad, tol, worst)
    return True, worst, ""


class FlashInfer:
    """flashinfer.norm.rmsnorm when it imports and runs (a small bf16 call JIT-builds the norm
    module); `why` says why not otherwise."""

    def __init__(self, device):
        self.fn, self.version, self.path, self.why = None, None, None, ""
        try:
            import flashinfer
            import flashinfer.norm as fnorm
            self.version = getattr(flashinfer, "__version__", "?")
            self.fn = fnorm.rmsnorm
            self.path = "cuda-jit" if getattr(fnorm, "_USE_CUDA_NORM", False) else "default (cute-dsl when usable)"
        except Exception as e:  # noqa: BLE001 - any import failure only disables FlashInfer
            self.why = "import flashinfer failed: %s" % short_error(e)
            return
        try:
            import torch
            print("flashinfer %s: first call (JIT-builds the norm module on first use: nvcc, about a minute)" %
                  self.version, flush=True)
            x = torch.randn(4, 2048, device=device, dtype=torch.bfloat16)
            w = torch.ones(2048, device=device, dtype=torch.bfloat16)
            self.fn(x, w, EPS)
            torch.cuda.synchronize(device)
        except Exception as e:  # noqa: BLE001
            self.why = "flashinfer %s: rmsnorm failed on a small bf16 input: %s" % (self.version, short_error(e))
            self.fn = None


def make_inputs(task, n_sets, device, dtype):
    import torch
    sets = []
    for k in range(n_sets):
        torch.manual_seed(1000 + k)
        with torch.device(device):
            (x,) = task.get_inputs()
        sets.append(x.to(device=device, dtype=dtype).contiguous())
    return sets


def build_reference(task, device, dtype):
    import torch
    torch.manual_seed(INIT_SEED)
    model = task.Model(*task.get_init_inputs()).to(device)
    return model.to(dtype).eval()


def build_builtin(path, task, ref_model, device, dtype):
    """(model, note): the ModelNew of path, built as the judge builds it, with ref_model's weights
    when the state dicts match."""
    import torch
    mod = load_module(path, "_bench_rmsnorm_best")
    cls = getattr(mod, "ModelNew", None)
    if cls is None:
        raise RuntimeError("%s defines no ModelNew" % path)
    torch.manual_seed(INIT_SEED)
    model = cls(*task.get_init_inputs())
    if isinstance(model, torch.nn.Module):
        model = model.to(device).to(dtype).eval()
        try:
            model.load_state_dict(ref_model.state_dict(), strict=True)
            note = "weights loaded from the reference Model"
        except Exception as e:  # noqa: BLE001 - names differ: keep the seeded initialisation
            note = "weights from torch.manual_seed(%d) (state dict differs: %s)" % (INIT_SEED, first_line(str(e), 120))
    else:
        note = "not an nn.Module"
    return model, note


def time_shape(ctx, dtype, t, h, task_path, best_entry):
    """One row: every requested implementation timed and checked on [t, h] in dtype."""
    import torch
    import torch.nn.functional as F
    dev, tdt, tol = ctx["device"], torch_dtype(dtype), TOLERANCE[dtype]
    nbytes = bytes_moved(t, h, ELEM_SIZE[dtype])
    row = {"dtype": dtype, "tokens": t, "hidden": h, "task": task_name(t, h), "bytes": nbytes,
           "timing": ctx["timing"], "time_us": {}, "min_us": {}, "host_call_us": {},
           "%s_time_us" % ("host" if ctx["timing"] == "gpu" else "gpu"): {},
           "correct": {}, "max_abs_err": {}, "error": {}, "bw_fraction": {}}
    task = load_module(task_path, "_bench_rmsnorm_task")
    ref = build_reference(task, dev, tdt)
    w = ref.weight.detach()
    inputs = make_inputs(task, ctx["sets"], dev, tdt)

    fns = {}
    if "eager" in ctx["impls"]:
        fns["eager"] = lambda x: F.rms_norm(x, (h,), w, EPS)
    if "compile" in ctx["impls"]:
        torch._dynamo.reset()
        fns["compile"] = torch.compile(ref, dynamic=False)
    if "flashinfer" in ctx["impls"]:
        fi = ctx["flashinfer"]
        if fi.fn is not None:
            fns["flashinfer"] = lambda x: fi.fn(x, w, EPS)
        else:
            row["error"]["flashinfer"] = "unavailable: " + fi.why
    if "builtin" in ctx["impls"]:
        if best_entry and best_entry.get("file"):
            row["builtin_file"] = best_entry["file"]
            row["builtin_judge"] = best_entry.get("judge")
            try:
                model, note = build_builtin(best_entry["file"], task, ref, dev, tdt)
                row["builtin_note"] = note
                fns["builtin"] = model
            except Exception as e:  # noqa: BLE001
                row["error"]["builtin"] = "cannot build: " + short_error(e)
                row["correct"]["builtin"] = False
        else:
            row["error"]["builtin"] = (best_entry or {}).get("why") or "no kernel"
            if best_entry and best_entry.get("judge"):
                row["builtin_judge"] = best_entry["judge"]

    for name, fn in fns.items():
        try:
            with torch.no_grad():
                out = fn(inputs[0])
            torch.cuda.synchronize(dev)
            ok, err, why = reference_check(out, inputs[0], w, EPS, tol)
            del out
            row["correct"][name], row["max_abs_err"][name] = ok, err
            if not ok:
                row["error"][name] = why
            med, mn, host = time_calls(fn, inputs, ctx["flush"], ctx["warmup"], ctx["iters"], ctx["timing"],
                                       ctx.get("cycles_per_us"))
            row["time_us"][name], row["min_us"][name], row["host_call_us"][name] = med, mn, host
            if ctx.get("both_timings"):
                other = "host" if ctx["timing"] == "gpu" else "gpu"
                row["%s_time_us" % other][name] = time_calls(fn, inputs, ctx["flush"], ctx["warmup"], ctx["iters"],
                                                              other, ctx.get("cycles_per_us"))[0]
            if ctx.get("copy_bps"):
                row["bw_fraction"][name] = nbytes / (med / 1e6) / ctx["copy_bps"]
        except Exception as e:  # noqa: BLE001 - one implementation's failure is this row's, not the run's
            msg = short_error(e)
            if name == "flashinfer" and dtype not in FLASHINFER_DTYPES:
                # FlashInfer's CUDA norm kernel dispatches fp16/bf16 only ("failed to dispatch data type").
                row["unsupported"] = True
                row["correct"][name] = None
                msg = "unsupported in %s (its CUDA norm kernel takes fp16/bf16): %s" % (dtype, msg)
            else:
                row["correct"][name] = False
            row["error"][name] = msg
            row["time_us"].pop(name, None)
            row["bw_fraction"].pop(name, None)
            torch.cuda.synchronize(dev)
    del inputs, fns
    if "compile" in ctx["impls"]:
        torch._dynamo.reset()
    torch.cuda.empty_cache()
    fill_ratios(row)
    return row


def good_time(row, impl):
    """The median time of impl when it ran and was correct, else None."""
    if row.get("correct", {}).get(impl) is True:
        return row.get("time_us", {}).get(impl)
    return None


def fill_ratios(row):
    b = good_time(row, "builtin")
    row["speedup_vs_flashinfer"] = speedup(good_time(row, "flashinfer"), b)
    row["speedup_vs_compile"] = speedup(good_time(row, "compile"), b)
    row["speedup_vs_eager"] = speedup(good_time(row, "eager"), b)
    return row


# ---------------------------------------------------------------- summary and goals

GOAL_KEYS = ("builtin_correct_every_shape", "builtin_ge_flashinfer_every_shape", "geomean_vs_flashinfer",
             "geomean_vs_compile", "bandwidth_large_shapes")


def summarise(rows, builtin_timed=True):
    """Per dtype: geomeans of the speedups (over shapes where both sides ran and were correct)
    and the goals (GOAL_KEYS): True (met), False (missed), or None when nothing measured applies
    (FlashInfer did not run in that dtype, no shape with tokens >= 1024, the builtin not timed)."""
    out = {}
    order = list(ELEM_SIZE)
    for dtype in sorted({r["dtype"] for r in rows}, key=lambda d: order.index(d) if d in order else 99):
        rs = [r for r in rows if r["dtype"] == dtype]
        vs_fi = [r["speedup_vs_flashinfer"] for r in rs if r.get("speedup_vs_flashinfer") is not None]
        vs_c = [r["speedup_vs_compile"] for r in rs if r.get("speedup_vs_compile") is not None]
        vs_e = [r["speedup_vs_eager"] for r in rs if r.get("speedup_vs_eager") is not None]
        no_builtin = [r["task"] for r in rs if good_time(r, "builtin") is None]
        fi_ran = [r for r in rs if good_time(r, "flashinfer") is not None]
        # On every shape FlashInfer ran on: a correct builtin kernel at least as fast.
        slower_than_fi = [r["task"] for r in fi_ran
                          if r.get("speedup_vs_flashinfer") is None or r["speedup_vs_flashinfer"] < 1.0]
        big = [r for r in rs if r["tokens"] >= GOAL_BW_MIN_TOKENS]
        bw = {r["task"]: (r.get("bw_fraction", {}).get("builtin") if good_time(r, "builtin") is not None else None)
              for r in big}
        below_bw = [r["task"] for r in big if bw[r["task"]] is None or bw[r["task"]] < GOAL_BW_FRACTION]
        g_fi, g_c = geomean(vs_fi), geomean(vs_c)
        goals = dict.fromkeys(GOAL_KEYS)
        if builtin_timed:
            goals.update({
                "builtin_correct_every_shape": not no_builtin,
                "builtin_ge_flashinfer_every_shape": (not slower_than_fi) if fi_ran else None,
                "geomean_vs_flashinfer": (g_fi >= GOAL_VS_FLASHINFER) if fi_ran else None,
                "geomean_vs_compile": (g_c is not None and g_c >= GOAL_VS_COMPILE)
                if any(good_time(r, "compile") is not None for r in rs) else None,
                "bandwidth_large_shapes": (not below_bw) if big else None,
            })
        out[dtype] = {
            "shapes": len(rs),
            "geomean_vs_flashinfer": g_fi, "n_vs_flashinfer": len(vs_fi),
            "geomean_vs_compile": g_c, "n_vs_compile": len(vs_c),
            "geomean_vs_eager": geomean(vs_e), "n_vs_eager": len(vs_e),
            "flashinfer_ran": len(fi_ran),
            "without_correct_builtin": no_builtin,
            "builtin_not_ge_flashinfer": slower_than_fi,
            "min_builtin_bw_fraction_large": min((v for v in bw.values() if v is not None), default=None),
            "below_bw_goal": below_bw,
            "goals": goals,
            "targets": {"geomean_vs_flashinfer": GOAL_VS_FLASHINFER, "geomean_vs_compile": GOAL_VS_COMPILE,
                        "bw_fraction": GOAL_BW_FRACTION, "bw_min_tokens": GOAL_BW_MIN_TOKENS},
        }
    return out


def _us(row, impl):
    v = row.get("time_us", {}).get(impl)
    if v is None:
        if impl == "flashinfer" and row.get("unsupported"):
            return "n/a"
        return "-"
    return ("%.1f" % v) + ("" if row.get("correct", {}).get(impl) else "!")


def _frac(row, impl):
    v = row.get("bw_fraction", {}).get(impl)
    return "-" if v is None else "%.2f" % v


def _x(v):
    return "-" if v is None else "%.2fx" % v


HEADER = "%-4s %6s %6s %9s | %9s %9s %9s %9s | %5s %5s %5s %5s | %7s %7s  %s" % (
    "dt", "tokens", "hidden", "MB", "eager", "compile", "flashinf", "builtin", "e.bw", "c.bw", "f.bw", "b.bw",
    "vs_fi", "vs_comp", "notes")


def format_row(r):
    notes = "; ".join("%s: %s" % (k, v) for k, v in r.get("error", {}).items()
                      if not (k == "flashinfer" and (r.get("unsupported") or v.startswith("unavailable"))))
    return "%-4s %6d %6d %9.2f | %9s %9s %9s %9s | %5s %5s %5s %5s | %7s %7s  %s" % (
        r["dtype"], r["tokens"], r["hidden"], r["bytes"] / 1e6, _us(r, "eager"), _us(r, "compile"),
        _us(r, "flashinfer"), _us(r, "builtin"), _frac(r, "eager"), _frac(r, "compile"), _frac(r, "flashinfer"),
        _frac(r, "builtin"), _x(r.get("speedup_vs_flashinfer")), _x(r.get("speedup_vs_compile")), notes)


def _goal(v):
    return {True: "MET", False: "MISSED", None: "n/a"}[v]


def goal_lines(dtype, s):
    """The goals of one dtype's summary, as printed."""
    g = s["goals"]
    parts = [
        "builtin correct on every shape: %s%s" % (
            _goal(g["builtin_correct_every_shape"]),
            " (not: %s)" % ", ".join(s["without_correct_builtin"]) if s["without_correct_builtin"] else ""),
        "builtin >= FlashInfer on every shape: %s%s" % (
            _goal(g["builtin_ge_flashinfer_every_shape"]),
            " (not: %s)" % ", ".join(s["builtin_not_ge_flashinfer"]) if s["builtin_not_ge_flashinfer"] else
            (" (FlashInfer ran on %d/%d shapes)" % (s["flashinfer_ran"], s["shapes"])
             if s["flashinfer_ran"] < s["shapes"] else "")),
        "geomean vs FlashInfer >= %.1fx: %s (%s)" % (GOAL_VS_FLASHINFER, _goal(g["geomean_vs_flashinfer"]),
                                                    _x(s["geomean_vs_flashinfer"])),
        "geomean vs torch.compile >= %.1fx: %s (%s)" % (GOAL_VS_COMPILE, _goal(g["geomean_vs_compile"]),
                                                       _x(s["geomean_vs_compile"])),
        ">= %.0f%% of copy bandwidth for tokens >= %d: %s%s" % (
            100 * GOAL_BW_FRACTION, GOAL_BW_MIN_TOKENS, _goal(g["bandwidth_large_shapes"]),
            " (min %s; below: %s)" % ("%.2f" % s["min_builtin_bw_fraction_large"]
                                      if s["min_builtin_bw_fraction_large"] is not None else "-",
                                      ", ".join(s["below_bw_goal"])) if s["below_bw_goal"] else ""),
    ]
    return ["%-4s goal: %s" % (dtype, p) for p in parts]


def print_summary(summary):
    print("\n== per dtype (speedup = other time / builtin time; geomean over shapes where both are correct) ==")
    for dtype, s in summary.items():
        print("%-4s geomean speedup of builtin: vs FlashInfer %s (%d shapes), vs torch.compile %s (%d), "
              "vs eager %s (%d)" % (dtype, _x(s["geomean_vs_flashinfer"]), s["n_vs_flashinfer"],
                                    _x(s["geomean_vs_compile"]), s["n_vs_compile"], _x(s["geomean_vs_eager"]),
                                    s["n_vs_eager"]))
        for line in goal_lines(dtype, s):
            print(line)
        met = [v for v in s["goals"].values() if v is not None]
        print("%-4s goals met: %d/%d (n/a: %d)" % (dtype, sum(1 for v in met if v), len(met),
                                                   len(s["goals"]) - len(met)))
    sys.stdout.flush()


def env_info(device, fi):
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "python": sys.version.split()[0], "flashinfer": fi.version if fi else None,
            "flashinfer_path": fi.path if fi else None, "flashinfer_unavailable": (fi.why or None) if fi else None}
    try:
        import torch
        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["device"] = torch.cuda.get_device_name(torch.device(device))
    except ImportError:
        info["torch"] = None
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    for k in ("FLASHINFER_CUDA_ARCH_LIST", "FLASHINFER_WORKSPACE_BASE", "FLASHINFER_USE_CUDA_NORM"):
        if os.environ.get(k):
            info[k] = os.environ[k]
    return info


# ---------------------------------------------------------------- main

def build_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma list (default %(default)s)")
    ap.add_argument("--hidden", default=",".join(map(str, HIDDEN)), help="comma list (default %(default)s)")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="comma list of fp32, bf16, fp16 (default %(default)s)")
    ap.add_argument("--tasks-dir", default=str(ROOT / "runs" / "rmsnorm-tasks"),
                    help="where the task files are written (default runs/rmsnorm-tasks)")
    ap.add_argument("--out", default=str(ROOT / "runs" / "rmsnorm"),
                    help="the builtin's runs go to OUT/DTYPE (default runs/rmsnorm; resumed when present)")
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"), help="adaexplore binary")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=4, help="tasks searched at once (per device)")
    ap.add_argument("--device", default="cuda:0", help="for the search and the timing")
    ap.add_argument("--extra", default="", help="extra flags for `adaexplore bench` (shell-split)")
    ap.add_argument("--no-search", action="store_true", help="time the kernels already in OUT/DTYPE")
    ap.add_argument("--tasks-only", action="store_true", help="write the task files and stop")
    ap.add_argument("--search-only", action="store_true",
                    help="write the tasks, run the builtin's search per dtype and stop (time later with --no-search)")
    ap.add_argument("--impls", default=",".join(IMPLS), help="what to time (default %(default)s)")
    ap.add_argument("--iters", type=int, default=50, help="timed calls per implementation (median; >= 50)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--sets", type=int, default=4, help="input sets used in turn")
    ap.add_argument("--timing", choices=("gpu", "host"), default="gpu",
                    help="gpu: the call's launches queued behind a spin before the start event (GPU time; "
                         "default); host: the host waits for the flush first, so launch overhead counts")
    ap.add_argument("--both-timings", action="store_true",
                    help="also time each implementation the other way (into the JSON's gpu_/host_time_us)")
    ap.add_argument("--copy-gib", type=float, default=1.0, help="size of the copy-bandwidth tensor")
    ap.add_argument("--json", dest="json_out", help="write rows, summary and environment here")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    tokens = parse_list(args.tokens, int, "token count")
    hidden = parse_list(args.hidden, int, "hidden size")
    dtypes = parse_dtypes(args.dtypes)
    impls = parse_impls(args.impls)
    if args.iters < 1 or args.warmup < 0 or args.sets < 1:
        raise SystemExit("bench/rmsnorm: --iters and --sets must be >= 1, --warmup >= 0")
    shapes = shape_grid(tokens, hidden)
    tasks = write_tasks(args.tasks_dir, shapes)
    print("bench/rmsnorm: %d tasks in %s" % (len(tasks), args.tasks_dir), flush=True)
    if args.tasks_only:
        return 0
    if args.search_only and args.no_search:
        raise SystemExit("bench/rmsnorm: --search-only and --no-search exclude each other")

    rcs = {}
    if "builtin" in impls and not args.no_search:
        for dtype in dtypes:
            cmd = search_command(args.bin, args.tasks_dir, dtype, Path(args.out) / dtype, args.steps, args.jobs,
                                 args.device, args.extra, args.timing)
            rcs[dtype] = run_search(cmd)
    if args.search_only:
        return 0 if all(rc == 0 for rc in rcs.values()) else 1

    import torch
    if not args.device.startswith("cuda") or not torch.cuda.is_available():
        print("bench/rmsnorm: no CUDA device (%s): the timing needs one" % args.device, file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.set_device(torch.device(args.device))

    copy_bps = measure_copy_bandwidth(args.device, args.copy_gib)
    print("copy bandwidth on %s (%s): %.0f GB/s (bytes read + written, %.2f GiB copied)" % (
        args.device, torch.cuda.get_device_name(torch.device(args.device)), copy_bps / 1e9, args.copy_gib), flush=True)
    fi = FlashInfer(args.device) if "flashinfer" in impls else None
    if fi is not None and fi.fn is None:
        print("FlashInfer unavailable, not timed: %s" % fi.why, flush=True)
    elif fi is not None:
        print("FlashInfer %s (norm path: %s)" % (fi.version, fi.path), flush=True)
    ctx = {"device": args.device, "impls": impls, "sets": args.sets, "warmup": args.warmup, "iters": args.iters,
           "copy_bps": copy_bps, "flashinfer": fi, "timing": args.timing, "both_timings": args.both_timings,
           "cycles_per_us": sleep_cycles_per_us(args.device),
           "flush": torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=args.device)}

    rows, crashed = [], None
    try:
        for dtype in dtypes:
            best = find_best_kernels(Path(args.out) / dtype, list(tasks)) if "builtin" in impls else {}
            print("\n%s: times in us (%s timing, median of %d), bw = fraction of copy bandwidth, "
                  "vs_* = other / builtin; `!` = wrong output" % (dtype, args.timing, args.iters))
            print(HEADER, flush=True)
            said = False
            for t, h in shapes:
                name = task_name(t, h)
                r = time_shape(ctx, dtype, t, h, tasks[name], best.get(name))
                rows.append(r)
                if r.get("unsupported") and not said:
                    said = True
                    print("(flashinfer in %s: %s)" % (dtype, r["error"]["flashinfer"]), flush=True)
                print(format_row(r), flush=True)
    except Exception as e:  # noqa: BLE001 - e.g. a kernel's illegal memory access poisons the CUDA context
        traceback.print_exc()
        crashed = short_error(e)
        print("bench/rmsnorm: the harness stopped (%s); summarising the %d rows measured" % (crashed, len(rows)),
              flush=True)
    summary = summarise(rows, builtin_timed="builtin" in impls)
    print_summary(summary)
    if args.json_out:
        meta = env_info(args.device, fi)
        meta.update(copy_gbs=copy_bps / 1e9, argv=sys.argv[1:] if argv is None else list(argv),
                    tasks_dir=str(args.tasks_dir), out=str(args.out), steps=args.steps, iters=args.iters,
                    warmup=args.warmup, sets=args.sets, eps=EPS, tolerance=TOLERANCE, search_rc=rcs,
                    timing=args.timing, cycles_per_us=ctx["cycles_per_us"],
                    timing_note="CUDA events around each call, the L2 flushed (256 MiB write) before it; median. "
                                + ("gpu: launches queued behind a spin first" if args.timing == "gpu" else
                                   "host: synchronised after the flush, launch overhead counted"))
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        meta["crashed"] = crashed
        Path(args.json_out).write_text(json.dumps({"meta": meta, "rows": rows, "summary": summary}, indent=1))
        print("rows, summary and environment: %s" % args.json_out, flush=True)
    return 1 if crashed else 0


if __name__ == "__main__":
    # Run as a script, sys.path[0] is bench/, whose profile.py would shadow the standard library's
    # profile module (torch._dynamo imports cProfile, which imports profile).
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except KeyboardInterrupt:
        print("bench/rmsnorm: interrupted", file=sys.stderr)
        sys.exit(130)
    except BaseException:  # noqa: BLE001 - a crash of the harness itself
        traceback.print_exc()
        sys.exit(1)

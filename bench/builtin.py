#!/usr/bin/env python3
"""bench/builtin: the `builtin` proposer (no LLM) over KernelBench tasks, with the issue's figures.

    python3 bench/builtin.py TASKDIR_OR_FILES... [--steps 30] [--jobs 4] [--bin build/adaexplore]
                             [--device cuda:0] [--out DIR] [--extra "..."] [--categories]
                             [--baselines eager,compile] [--report-only] [--no-degenerate-check]
                             [--only memory-bound,pooling,...]

Runs `adaexplore bench SPEC --proposer builtin --steps N --jobs J --device D --tolerance strict
--baselines eager,compile --out OUT` (plus --resume when OUT already holds a run.sqlite), streaming
the child's stderr as `[ELAPSED s] line`, so a run cut short by an outer `timeout` still shows its
progress (SIGTERM/SIGINT stop the child and the report below is printed from what was stored).
Several task specs are merged into one folder of symlinks, OUT/_tasks, because `bench` takes one
spec (file names must then be unique).

Then one line per task: correct or why not (the proposer's decline, like "cannot trace: ..." or
"nothing to fuse: ...", else the most promising failed verdict's status and first error line), the
best re-timed runtime, speedup vs eager and torch.compile, the degenerate flag and, for
memory-bound tasks, the achieved bandwidth as a fraction of the device's measured copy bandwidth
(and `gpu F`: the same on the kernels' own GPU busy time, where the best verdict has one).
For GEMMs, convolutions and Level-2/3 tasks, the best verdict's roofline instead: `mm F (T
TFLOP/s)`, the achieved FLOP/s as a fraction of the device's measured fp32-accurate matrix-product
peak (plain fp32 or 3xTF32, whichever is faster), and `gen P%`, the share of the GPU busy time in
generated kernels (`_ax_*`). A correct kernel slower than torch.compile (eager without it) says
why: most of its time in library kernels it does not generate (the largest named), else compute-
or memory-bound at its fraction of the peak. Where the search judged generated convolutions (plan
`conv`) and plans that leave them to cuDNN, the row compares the fastest correct candidate of each
(`conv generated A ms vs cuDNN plans B ms (B/A x)`, search-time medians), and the aggregates list
the tasks where cuDNN stays faster, with where the generated candidate loses (its convolution
kernels against cuDNN's, or its other kernels) where the search profiled both. Likewise, where it
judged the forward replayed from a CUDA graph (plan `graph`) and launched kernel by kernel, the
row gives `CUDA graph A ms vs launched B ms (B/A x)` and the aggregates their geomean; where it judged
generated convolutions computing the statistics of the norm after them (plan `convstats`) and
generated convolutions without, `norm statistics in the conv kernel A ms vs separate B ms (B/A x)`.
Per
level, the aggregates also give the median share of the GPU time in generated kernels over the
profiled correct tasks, and on how many it is at least 0.70.
Rows come from OUT/summary.json; a task missing there falls back to OUT/run.sqlite (`tasks` table:
its summary once it finished; `trees`: why not), and a task with neither is "no result (run cut
short?)". All rows go to OUT/bench_builtin.jsonl, the aggregates to OUT/bench_builtin_summary.json.

Definitions:
- Category (classify()): by keywords of the file name with the numeric prefix removed, first match
  wins: whole networks (net, vgg, lstm, gru, rnn, mlp, mamba, attention) -> network/attention;
  conv -> conv; matmul, gemm, matrix, bmm -> matmul (but Matrix_scalar -> elementwise); pool ->
  pooling; cum -> scan; loss -> loss; softmax -> softmax; norm -> normalisation; reduction,
  argmax, argmin -> reduction; activation names (relu, gelu, sigmoid, tanh, swish, ...) ->
  elementwise; anything else -> other.
- Memory-bound: category is elementwise, normalisation, reduction, softmax or loss (Level-1 style
  single operators; Level-2 names start with a conv/gemm/matmul and so are never memory-bound).
- Bytes moved (estimate_bytes(), memory-bound tasks only): sum of .nbytes of get_inputs()'s tensors plus the outputs'
  bytes, parameters and buffers excluded; inputs and outputs are built on the meta device, so
  nothing is allocated (fallback for the outputs: the shapes recorded in the verdicts).
- Copy bandwidth: median over 20 timed `dst.copy_(src)` of a 1 GiB float32 tensor (CUDA events,
  after warm-up), bytes = 2 x size. Achieved = bytes moved / best runtime; fraction = achieved /
  copy. Skipped on the CPU (figures are labelled CPU there). The runtime is the judge's timed
  median, which counts the host's time from the call to its first launch (about 20-30 us of
  Python and Triton launch overhead after the L2 flush's synchronise) and any gaps between
  launches. The kernels' own fraction (`bw_fraction_gpu`) divides by the best verdict's
  `gpu_busy_ms` instead: the summed GPU durations of the activities (kernels, copies, memsets)
  of one more call under the profiler, the device held alone and the L2 flushed first. The
  profiled call's span (`gpu_span_ms`) is kept too, but its launch gaps include the profiler's
  own host overhead, so it is not used.
- Degenerate: the judge's flag `degenerate_task` (reference output independent of the inputs, or
  an all-zero output passes); for tasks no verdict covers (declined), `adaexplore tasks` is asked.
- Level: the task file's parent folder name (level1, level2, ...).
- Aggregates exclude degenerate tasks; a task without a correct kernel counts as speedup 1.0:
  per level, % correct and geomean over tasks of max(speedup, 1) vs eager and vs compile; for
  memory-bound Level-1 tasks, % correct and over the correct ones the median and min bandwidth
  fraction and how many reach >= 0.80.
"""

import argparse
import datetime
import importlib.util
import json
import math
import os
import re
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEMORY_BOUND = ("elementwise", "normalisation", "reduction", "softmax", "loss")
BW_TARGET = 0.80

_ACTIVATIONS = ("relu", "gelu", "sigmoid", "tanh", "swish", "silu", "selu", "elu", "softplus", "softsign",
                "mish", "clamp")

# (category, keywords): first match wins; see the module docstring.
_RULES = (
    ("network", ("net", "vgg", "lstm", "gru", "rnn", "mlp", "mamba", "transformer")),
    ("attention", ("attention",)),
    ("conv", ("conv",)),
    ("elementwise", ("matrix_scalar",)),
    ("matmul", ("matmul", "gemm", "matrix", "bmm")),
    ("pooling", ("pool",)),
    ("scan", ("cum",)),
    ("loss", ("loss",)),
    ("softmax", ("softmax",)),
    ("normalisation", ("norm",)),
    ("reduction", ("reduction", "argmax", "argmin")),
    ("elementwise", _ACTIVATIONS),
)


def classify(name):
    """Category of a task from its file name ("19_ReLU.py" or "19_ReLU")."""
    stem = Path(name).name
    if stem.endswith(".py"):
        stem = stem[:-3]
    key = re.sub(r"^\d+_", "", stem).lower()
    for cat, words in _RULES:
        if any(w in key for w in words):
            return cat
    return "other"


def is_memory_bound(category):
    return category in MEMORY_BOUND


# ---------------------------------------------------------------- task specs

def _numeric_prefix(name):
    m = re.match(r"\d+", name)
    return int(m.group(0)) if m else -1


def resolve_spec(spec):
    """Task files of one spec, as `adaexplore bench` resolves it (file, folder, levelN/ID,
    kernelbench:ROOT:LEVEL:ID)."""
    def find(folder, pid):
        folder = Path(folder)
        hits = [p for p in folder.glob("*.py") if p.name == pid + ".py" or p.name.startswith(pid + "_")]
        if len(hits) != 1:
            raise SystemExit("bench/builtin: no unique problem %s in %s" % (pid, folder))
        return [hits[0]]

    if spec.startswith("kernelbench:"):
        root, level, pid = spec[len("kernelbench:"):].rsplit(":", 2)
        return find(Path(root) / ("level" + level), pid)
    p = Path(spec)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = [f for f in p.iterdir() if f.suffix == ".py" and not f.name.startswith("_") and f.is_file()]
        return sorted(files, key=lambda f: (_numeric_prefix(f.name), f.name))
    if p.name.isdigit() and p.parent.is_dir():
        return find(p.parent, p.name)
    raise SystemExit("bench/builtin: no such task file or folder: %s" % spec)


def level_of(path):
    """The group a task belongs to: its file's parent folder name (symlinks resolved)."""
    return Path(os.path.realpath(path)).parent.name


# ---------------------------------------------------------------- bytes and bandwidth

def _tensors(x):
    import torch
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(y)


def _nbytes(t):
    return t.numel() * t.element_size()


_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16}


def output_bytes_from_shapes(outputs):
    """Bytes of [{"shape": [...], "dtype": "float32"}, ...] (the verdicts' task.outputs)."""
    total = 0
    for o in outputs:
        dt = str(o.get("dtype", "")).replace("torch.", "")
        if dt not in _DTYPE_BYTES:
            return None
        total += math.prod(o.get("shape", [])) * _DTYPE_BYTES[dt]
    return total


def load_task_module(path):
    name = "_bench_task_%d_%s" % (abs(hash(str(path))), re.sub(r"\W", "_", Path(path).stem))
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def estimate_bytes(path):
    """(input_bytes, output_bytes, error): the task's tensors built on the meta device; parameters
    and buffers of the Model are not counted. output_bytes is None when the forward does not run
    on meta (data-dependent shapes); error says why."""
    import torch
    mod = load_task_module(path)
    with torch.device("meta"):
        inputs = mod.get_inputs()
        init = mod.get_init_inputs()
    in_bytes = sum(_nbytes(t) for t in _tensors(inputs))
    try:
        with torch.device("meta"), torch.no_grad():
            model = mod.Model(*init)
            args = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
            out = model(*args)
        return in_bytes, sum(_nbytes(t) for t in _tensors(out)), ""
    except Exception as e:  # noqa: BLE001 - any failure only loses the output estimate
        return in_bytes, None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def measure_copy_bandwidth(device, gib=1.0, iters=20, warmup=5):
    """Device-to-device copy bandwidth in bytes/s (2 x size per copy, median of `iters`)."""
    import torch
    n = int(gib * (1 << 30)) // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    for _ in range(warmup):
        dst.copy_(src)
    torch.cuda.synchronize(device)
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    moved = 2 * src.numel() * src.element_size()
    del src, dst
    torch.cuda.empty_cache()
    return moved / (statistics.median(times) / 1e3)


# ---------------------------------------------------------------- reading a run

def first_line(text, limit=200):
    lines = [l.strip() for l in str(text or "").splitlines() if l.strip()]
    if not lines:
        return ""
    line = lines[0]
    if line.startswith("Traceback") and len(lines) > 1:
        line = lines[-1]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def checkpoint_store(out):
    """Folds run.sqlite's write-ahead log into the file (a bench stopped by a signal leaves its
    last writes there), so that the run folder's run.sqlite alone holds the whole run. True when
    the log was fully checkpointed (or there is none)."""
    db = Path(out) / "run.sqlite"
    if not db.exists():
        return True
    try:
        con = sqlite3.connect(str(db), timeout=30)
        busy, _log, _done = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        con.close()
        return busy == 0
    except sqlite3.Error as e:
        print("bench/builtin: cannot checkpoint %s: %s" % (db, e), flush=True)
        return False


def read_store(out):
    """What run.sqlite knows, per task: {"summary", "tree", "verdicts"} (missing keys when absent),
    and the config. Read-only; an unreadable store gives empty maps."""
    db = Path(out) / "run.sqlite"
    tasks, config = {}, {}
    if not db.exists():
        return tasks, config
    try:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
        for key, value in con.execute("SELECT key, value FROM meta"):
            if key == "config":
                config = json.loads(value)
        for name, _status, summ, updated in con.execute("SELECT task, status, summary, updated FROM tasks"):
            tasks.setdefault(name, {})["summary"] = json.loads(summ)
            tasks[name]["updated"] = updated
        for name, tree in con.execute("SELECT task, tree FROM trees"):
            tasks.setdefault(name, {})["tree"] = json.loads(tree)
        for name, verdict in con.execute("SELECT task, verdict FROM verdicts"):
            tasks.setdefault(name, {}).setdefault("verdicts", []).append(json.loads(verdict))
        con.close()
    except (sqlite3.Error, ValueError) as e:
        print("bench/builtin: cannot read %s: %s" % (db, e), flush=True)
    return tasks, config


def read_summary(out):
    """{task: entry} of OUT/summary.json, each entry with "_mtime" (the file's)."""
    p = Path(out) / "summary.json"
    try:
        data = json.loads(p.read_text())
        mtime = p.stat().st_mtime
        return {t["task"]: dict(t, _mtime=mtime) for t in data.get("tasks", []) if isinstance(t, dict) and "task" in t}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def why_not(summary, tree):
    """Why a task has no correct kernel: the proposer's stop reason, else the most promising
    failed node (highest reward, then first) as `status: first error line`."""
    status = (summary or {}).get("status", "")
    parts = []
    if status.startswith("stopped: "):
        parts.append(status[len("stopped: "):])
    nodes = [n for n in (tree or {}).get("nodes", []) if n.get("kind") != "root"]
    if nodes:
        best = max(nodes, key=lambda n: (n.get("reward", 0), -n.get("id", 0)))
        o = best.get("outcome", {})
        err = first_line(o.get("error", ""))
        if err.startswith("builtin: "):
            err = err[len("builtin: "):]
        st = o.get("status", "?")
        if any(n.get("outcome", {}).get("correct") for n in nodes):
            fails = (summary or {}).get("retime_failures") or []
            parts.append("correct candidates, but none passed the final re-timing" + (
                " (" + "; ".join("node %s: %s" % (f.get("node"), first_line(f.get("reason", "")))
                                 for f in fails if isinstance(f, dict)) + ")" if fails else ""))
        elif st == "no_candidate":
            parts.append(err or "no candidate")
        else:
            parts.append("%s: %s" % (st, err) if err else st)
    if not parts:
        parts.append("no candidate judged (status %r)" % status if status else "no result")
    return "; ".join(parts)


def degenerate_from(summary, verdicts):
    """(True/False/None, kinds): None when nothing the judge wrote covers the task."""
    kinds, known = set(), False
    for f in (summary or {}).get("flags", []) or []:
        if f.startswith("degenerate:"):
            kinds.add(f.split(":", 1)[1])
        if f == "degenerate_task":
            kinds.add("degenerate_task")
    if summary and summary.get("best_node", -1) >= 0:
        known = True
    for v in verdicts or []:
        t = v.get("task") if isinstance(v.get("task"), dict) else {}
        if "degenerate" in t:
            known = True
            d = t["degenerate"]
            if isinstance(d, list):
                kinds.update(d)
            elif d is True:
                kinds.add("degenerate_task")
        for f in v.get("flags", []) or []:
            if f.startswith("degenerate:"):
                kinds.add(f.split(":", 1)[1])
    if len(kinds) > 1:
        kinds.discard("degenerate_task")  # the specific kinds say more
    if kinds:
        return True, sorted(kinds)
    return (False if known else None), []


def task_row(name, path, summary, store_entry):
    """One per-task row (without bytes/bandwidth), from summary.json's entry or the store."""
    store_entry = store_entry or {}
    if summary and store_entry.get("summary") and store_entry.get("updated", 0) > summary.get("_mtime", 0) + 1:
        summary = None  # summary.json is from an earlier (resumed) run; the store has this task's newer result
    if summary:
        summary = {k: v for k, v in summary.items() if k != "_mtime"}
    source = "summary.json" if summary else ("run.sqlite" if store_entry.get("summary") else "none")
    summary = summary or store_entry.get("summary")
    row = {"task": name, "path": str(path) if path else "", "level": level_of(path) if path else "",
           "category": classify(name), "source": source}
    row["memory_bound"] = is_memory_bound(row["category"])
    verdicts = store_entry.get("verdicts", [])
    if not summary:
        row.update(correct=False, status="missing", reason="no result (run cut short?)")
        tree = store_entry.get("tree")
        nodes = [n for n in (tree or {}).get("nodes", []) if n.get("kind") != "root"]
        good = [n for n in nodes if n.get("outcome", {}).get("correct")]
        if nodes:
            row["reason"] += " [%d steps stored%s]" % (
                len(nodes), ", best so far %.3fx vs eager" % max(n["outcome"].get("speedup", 0) for n in good)
                if good else "")
    else:
        best = summary.get("best_node", -1)
        correct = best is not None and best >= 0 and summary.get("runtime_ms") is not None
        sp = summary.get("speedup") or {}
        base = summary.get("baseline_ms") or {}
        row.update(correct=bool(correct), status=summary.get("status", ""), best_node=best,
                   runtime_ms=summary.get("runtime_ms") if correct else None,
                   speedup_eager=sp.get("eager") if correct else None,
                   speedup_compile=sp.get("compile") if correct else None,
                   baseline_eager_ms=base.get("eager"), baseline_compile_ms=base.get("compile"),
                   steps=summary.get("steps"), judged=summary.get("judged"), wall_s=summary.get("wall_s"),
                   device=summary.get("device", ""))
        bv = summary.get("best_verdict") or {}
        row["gpu_span_ms"] = bv.get("gpu_span_ms") if correct else None
        row["gpu_busy_ms"] = bv.get("gpu_busy_ms") if correct else None
        row["roofline"] = roofline_of(bv) if correct else None
        row["reason"] = "" if correct else why_not(summary, store_entry.get("tree"))
        row["loses_because"] = loses_because(row)
    row["conv_vs_cudnn"] = conv_vs_cudnn(store_entry.get("tree"))
    row["graph_vs_launches"] = graph_vs_launches(store_entry.get("tree"))
    row["stats_vs_separate"] = stats_vs_separate(store_entry.get("tree"))
    for v in verdicts:  # baselines from any timed verdict when the summary lacks them
        b = v.get("baseline_ms") or {}
        for k in ("eager", "compile"):
            if row.get("baseline_%s_ms" % k) is None and b.get(k) is not None:
                row["baseline_%s_ms" % k] = b[k]
    deg, kinds = degenerate_from(summary, verdicts)
    row["degenerate"], row["degenerate_kinds"] = deg, kinds
    outs = [v["task"]["outputs"] for v in verdicts if isinstance(v.get("task"), dict) and v["task"].get("outputs")]
    row["_verdict_outputs"] = outs[0] if outs else None
    return row


GENERATED_TARGET = 0.70  # a network counts as generated when its kernels take this share of the GPU time
GENERATED_PREFIX = "_ax_"  # the builtin compiler's kernels; anything else is a library's (cuDNN, cuBLAS, ATen)
ROOFLINE_CATEGORIES = ("conv", "matmul", "network/attention")


def roofline_of(best_verdict):
    """The best kernel's roofline from its verdict's GPU profile (None without one): the bound, the
    achieved TFLOP/s and GB/s as fractions of the device's measured peaks (copy bandwidth; the
    fastest fp32-accurate matrix-product rate, plain fp32 or 3xTF32), the share of the GPU busy time
    in generated kernels, and the largest library kernel with its share."""
    prof = (best_verdict or {}).get("profile") or {}
    roof = prof.get("roofline") or {}
    kernels = [k for k in prof.get("kernels") or [] if isinstance(k, dict)]
    if not roof and not kernels:
        return None
    busy = prof.get("busy_ms") or sum(k.get("ms", 0) for k in kernels)
    generated = sum(k.get("ms", 0) for k in kernels if str(k.get("name", "")).startswith(GENERATED_PREFIX))
    library = [k for k in kernels if not str(k.get("name", "")).startswith(GENERATED_PREFIX)]
    top = max(library, key=lambda k: k.get("ms", 0)) if library else None
    return {"bound": roof.get("bound"), "tflops": roof.get("tflops"), "gbps": roof.get("gbps"),
            "flops_fraction": roof.get("flops_fraction"), "bandwidth_fraction": roof.get("bandwidth_fraction"),
            "peak_tflops": roof.get("peak_tflops"), "peak_gbps": roof.get("peak_gbps"),
            "generated_share": generated / busy if busy else None,
            "top_library_kernel": top.get("name") if top else None,
            "top_library_share": top.get("ms", 0) / busy if top and busy else None}


def loses_because(row):
    """Why a correct kernel is slower than torch.compile (or eager, without a compile baseline), from
    its roofline; "" when it is not slower or there is no profile."""
    ref = row.get("speedup_compile") if row.get("speedup_compile") is not None else row.get("speedup_eager")
    roof = row.get("roofline")
    if not row.get("correct") or ref is None or ref >= 1.0 or not roof:
        return ""
    gen = roof.get("generated_share")
    if gen is not None and gen < 0.5 and roof.get("top_library_kernel"):
        return "%.0f%% of its GPU time is in library kernels it does not generate (largest: %s, %.0f%%)" % (
            100 * (1 - gen), roof["top_library_kernel"][:60], 100 * (roof.get("top_library_share") or 0))
    if roof.get("bound") == "compute" and roof.get("flops_fraction") is not None:
        return "compute-bound at %.2f of the fp32-accurate matmul peak (%.0f TFLOP/s)" % (
            roof["flops_fraction"], roof.get("peak_tflops") or 0)
    if roof.get("bandwidth_fraction") is not None:
        return "memory-bound at %.2f of copy bandwidth" % roof["bandwidth_fraction"]
    return ""


def _conv_split(kernels):
    """A profiled candidate's GPU time (its node's `outcome.kernels`, [name, ms] pairs) split into
    its convolutions (generated `_ax_gemm_kernel*`, or a library's: cuDNN/CUTLASS names with conv,
    fprop, dgrad, xmma or implicit) and everything else; None without kernels."""
    if not kernels:
        return None
    conv = other = 0.0
    for k in kernels:
        name, ms = (k[0], k[1]) if isinstance(k, (list, tuple)) else (k.get("name", ""), k.get("ms", 0))
        low = str(name).lower()
        if low.startswith("_ax_gemm_kernel") or (not low.startswith(GENERATED_PREFIX) and any(
                w in low for w in ("conv", "fprop", "dgrad", "xmma", "implicit"))):
            conv += ms
        else:
            other += ms
    return conv, other


def fastest_with_and_without(tree, key, among=None):
    """The outcomes of the fastest correct candidates of a search whose plan sets `key` (True) and
    whose plan does not (False), by their judged medians, over the plans that `among` (a predicate
    on the plan) keeps; None unless the search has both."""
    best = {True: None, False: None}
    for n in (tree or {}).get("nodes", []):
        o, plan = n.get("outcome") or {}, n.get("plan")
        if n.get("kind") == "root" or not isinstance(plan, dict) or not o.get("correct") or not o.get("runtime_ms"):
            continue
        if among is not None and not among(plan):
            continue
        k = bool(plan.get(key))
        if best[k] is None or o["runtime_ms"] < best[k]["runtime_ms"]:
            best[k] = o
    return best if best[True] is not None and best[False] is not None else None


def graph_vs_launches(tree):
    """For a task whose search judged a plan replayed from a CUDA graph (plan `graph`): the
    fastest correct such candidate's time against the fastest correct one launched kernel by
    kernel, as {"graph_ms", "launched_ms", "ratio" (launched / graph)}; None without both."""
    best = fastest_with_and_without(tree, "graph")
    if best is None:
        return None
    return {"graph_ms": best[True]["runtime_ms"], "launched_ms": best[False]["runtime_ms"],
            "ratio": best[False]["runtime_ms"] / best[True]["runtime_ms"]}


def stats_vs_separate(tree):
    """For a task whose search judged generated convolutions computing the statistics of the norm
    after them (plan `convstats`): the fastest correct such candidate's time against the fastest
    correct one with generated convolutions and the norm's own statistics kernel, as
    {"fused_ms", "separate_ms", "ratio" (separate / fused)}; None without both."""
    best = fastest_with_and_without(tree, "convstats", among=lambda plan: bool(plan.get("conv")))
    if best is None:
        return None
    return {"fused_ms": best[True]["runtime_ms"], "separate_ms": best[False]["runtime_ms"],
            "ratio": best[False]["runtime_ms"] / best[True]["runtime_ms"]}


def conv_vs_cudnn(tree):
    """For a task whose search judged generated convolutions (plan `conv`): the fastest correct such
    candidate's time against the fastest correct one that leaves them to cuDNN, as
    {"generated_ms", "cudnn_ms", "ratio" (cudnn / generated)}; None when either side has none.
    Times are the search's judged medians (not the final re-timing). Where both candidates were
    profiled (their nodes keep `outcome.kernels`), "why" says where the generated one loses: its
    convolution kernels against cuDNN's, or the rest (layout copies, epilogues)."""
    best = fastest_with_and_without(tree, "conv")
    if best is None:
        return None
    out = {"generated_ms": best[True]["runtime_ms"], "cudnn_ms": best[False]["runtime_ms"],
           "ratio": best[False]["runtime_ms"] / best[True]["runtime_ms"]}
    gen, lib = _conv_split(best[True].get("kernels")), _conv_split(best[False].get("kernels"))
    if gen and lib and out["ratio"] < 1.0:
        if gen[0] > lib[0]:
            out["why"] = "its convolution kernels take %.4g ms against cuDNN's %.4g ms" % (gen[0], lib[0])
        else:
            out["why"] = "its other kernels (layout copies, epilogues) take %.4g ms against %.4g ms" % (gen[1], lib[1])
    return out


def add_bandwidth(row, copy_bps):
    """Fills achieved bandwidth and the fraction of copy bandwidth (memory-bound, correct rows)."""
    row["achieved_gbs"] = row["bw_fraction"] = row["bw_fraction_gpu"] = None
    row["copy_gbs"] = copy_bps / 1e9 if copy_bps else None
    b, ms = row.get("bytes"), row.get("runtime_ms")
    if b and ms and ms > 0:
        achieved = b / (ms / 1e3)
        row["achieved_gbs"] = achieved / 1e9
        if copy_bps and row.get("memory_bound"):
            row["bw_fraction"] = achieved / copy_bps
            busy = row.get("gpu_busy_ms")
            if busy and busy > 0:
                row["bw_fraction_gpu"] = b / (busy / 1e3) / copy_bps
    return row


# ---------------------------------------------------------------- aggregates

def geomean(xs):
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def clamped_speedup(row, key):
    """max(speedup, 1); a task without a correct kernel (or without that baseline) counts 1.0."""
    sp = row.get(key) if row.get("correct") else None
    return max(sp, 1.0) if sp else 1.0


def aggregate(rows, compile_baseline=True):
    """The figures of the issue, degenerate tasks excluded everywhere; vs-compile figures only
    when the run timed a torch.compile baseline."""
    keep = [r for r in rows if r.get("degenerate") is not True]
    agg = {"tasks": len(rows), "degenerate_excluded": sorted(r["task"] for r in rows if r.get("degenerate") is True),
           "degenerate_unknown": sorted(r["task"] for r in rows if r.get("degenerate") is None), "levels": {}}
    for level in sorted({r["level"] for r in keep}):
        rs = [r for r in keep if r["level"] == level]
        ok = [r for r in rs if r.get("correct")]
        # The tasks the run finished (a result in the summary or the store):
        # what a run cut short says about the compiler, as opposed to how far it got.
        done = [r for r in rs if r.get("status") != "missing"]
        done_ok = [r for r in done if r.get("correct")]
        agg["levels"][level] = {
            "tasks": len(rs), "correct": len(ok), "correct_pct": 100.0 * len(ok) / len(rs),
            "geomean_eager": geomean(clamped_speedup(r, "speedup_eager") for r in rs),
            "geomean_compile": geomean(clamped_speedup(r, "speedup_compile") for r in rs) if compile_baseline else None,
            "finished": {
                "tasks": len(done), "correct": len(done_ok),
                "geomean_eager": geomean(clamped_speedup(r, "speedup_eager") for r in done) if done else None,
                "geomean_compile": (geomean(clamped_speedup(r, "speedup_compile") for r in done)
                                    if done and compile_baseline else None),
            },
        }
    mb = [r for r in keep if r["level"] == "level1" and r.get("memory_bound")]
    mb_ok = [r for r in mb if r.get("correct")]
    fr = sorted(r["bw_fraction"] for r in mb_ok if r.get("bw_fraction") is not None)
    gf = sorted(r["bw_fraction_gpu"] for r in mb_ok if r.get("bw_fraction_gpu") is not None)
    agg["level1_memory_bound"] = {
        "tasks": len(mb), "correct": len(mb_ok), "correct_pct": 100.0 * len(mb_ok) / len(mb) if mb else None,
        "with_fraction": len(fr), "median_fraction": statistics.median(fr) if fr else None,
        "min_fraction": fr[0] if fr else None, "at_least_0_80": sum(1 for f in fr if f >= BW_TARGET),
        "with_gpu_fraction": len(gf), "median_gpu_fraction": statistics.median(gf) if gf else None,
        "min_gpu_fraction": gf[0] if gf else None, "gpu_at_least_0_80": sum(1 for f in gf if f >= BW_TARGET),
        "by_category": {c: {"tasks": sum(1 for r in mb if r["category"] == c),
                            "correct": sum(1 for r in mb_ok if r["category"] == c)} for c in MEMORY_BOUND},
    }
    # GEMMs and convolutions: how close to the math's peak, and which lose and why.
    mm = [r for r in keep if r.get("correct") and (r.get("roofline") or {}).get("flops_fraction") is not None
          and (r["category"] in ROOFLINE_CATEGORIES or r["level"] in ("level2", "level3"))]
    ff = sorted(r["roofline"]["flops_fraction"] for r in mm)
    agg["matmul_roofline"] = {
        "with_profile": len(ff), "median_flops_fraction": statistics.median(ff) if ff else None,
        "slower": [{"task": r["task"], "why": r["loses_because"]} for r in keep if r.get("loses_because")],
    }
    # How much of each correct kernel's GPU time runs in generated kernels, per level (a network's
    # operators that stay PyTorch calls show here).
    agg["generated_share"] = {}
    for level in sorted({r["level"] for r in keep}):
        sh = sorted(r["roofline"]["generated_share"] for r in keep
                    if r["level"] == level and r.get("correct") and (r.get("roofline") or {}).get("generated_share") is not None)
        if sh:
            agg["generated_share"][level] = {
                "with_profile": len(sh), "median": statistics.median(sh),
                "at_least_0_70": sum(1 for s in sh if s >= GENERATED_TARGET)}
    # Generated convolutions against the cuDNN plans of the same search.
    cv = [r for r in keep if r.get("conv_vs_cudnn")]
    agg["conv_vs_cudnn"] = {
        "tasks": len(cv), "geomean_ratio": geomean(r["conv_vs_cudnn"]["ratio"] for r in cv) if cv else None,
        "faster": sum(1 for r in cv if r["conv_vs_cudnn"]["ratio"] > 1.0),
        "lose": [dict({"task": r["task"], "ratio": r["conv_vs_cudnn"]["ratio"]},
                      **({"why": r["conv_vs_cudnn"]["why"]} if r["conv_vs_cudnn"].get("why") else {}))
                 for r in sorted(cv, key=lambda r: r["conv_vs_cudnn"]["ratio"]) if r["conv_vs_cudnn"]["ratio"] <= 1.0],
    }
    # The forward replayed from a CUDA graph against the same search's launched plans.
    gv = [r for r in keep if r.get("graph_vs_launches")]
    agg["graph_vs_launches"] = {
        "tasks": len(gv), "geomean_ratio": geomean(r["graph_vs_launches"]["ratio"] for r in gv) if gv else None,
        "faster": sum(1 for r in gv if r["graph_vs_launches"]["ratio"] > 1.0)}
    # Norm statistics in the convolution's kernel against a statistics kernel of their own.
    sv = [r for r in keep if r.get("stats_vs_separate")]
    agg["stats_vs_separate"] = {
        "tasks": len(sv), "geomean_ratio": geomean(r["stats_vs_separate"]["ratio"] for r in sv) if sv else None,
        "faster": sum(1 for r in sv if r["stats_vs_separate"]["ratio"] > 1.0)}
    return agg


# ---------------------------------------------------------------- printing

def _x(v):
    return "%.3fx" % v if v is not None else "-"


def format_row(r):
    ok = "yes" if r.get("correct") else "no"
    deg = {True: "DEGEN", False: "", None: "deg?"}[r.get("degenerate")]
    bw = ""
    if r.get("bw_fraction") is not None:
        bw = "bw %.2f (%.0f GB/s)" % (r["bw_fraction"], r["achieved_gbs"])
        if r.get("bw_fraction_gpu") is not None:
            bw += " gpu %.2f" % r["bw_fraction_gpu"]
    elif r.get("memory_bound") and r.get("correct") and r.get("achieved_gbs") is not None:
        bw = "%.3g GB/s" % r["achieved_gbs"]
    ms = "%.4f" % r["runtime_ms"] if r.get("runtime_ms") is not None else "-"
    note = r.get("reason", "")
    roof = r.get("roofline")
    if roof and (r.get("category") in ROOFLINE_CATEGORIES or r.get("level") in ("level2", "level3")):
        # GEMMs and convolutions: the achieved FLOP/s against the peak of the math used.
        if roof.get("flops_fraction") is not None and roof.get("tflops"):
            bw = "mm %.2f (%.1f TFLOP/s)" % (roof["flops_fraction"], roof["tflops"])
        if roof.get("generated_share") is not None:
            note = "; ".join(x for x in ("gen %.0f%%" % (100 * roof["generated_share"]), note) if x)
    cv = r.get("conv_vs_cudnn")
    if cv:
        note = "; ".join(x for x in (note, "conv generated %.4g ms vs cuDNN plans %.4g ms (%.2fx)" % (
            cv["generated_ms"], cv["cudnn_ms"], cv["ratio"])) if x)
    gv = r.get("graph_vs_launches")
    if gv:
        note = "; ".join(x for x in (note, "CUDA graph %.4g ms vs launched %.4g ms (%.2fx)" % (
            gv["graph_ms"], gv["launched_ms"], gv["ratio"])) if x)
    sv = r.get("stats_vs_separate")
    if sv:
        note = "; ".join(x for x in (note, "norm statistics in the conv kernel %.4g ms vs separate %.4g ms (%.2fx)" % (
            sv["fused_ms"], sv["separate_ms"], sv["ratio"])) if x)
    if r.get("loses_because"):
        note = (note + "; " if note else "") + "slower: " + r["loses_because"]
    return "%-44s %-7s %-13s %-3s %10s %9s %9s %-5s %-22s %s" % (
        r["task"][:44], r.get("level", "")[:7], r["category"], ok, ms, _x(r.get("speedup_eager")),
        _x(r.get("speedup_compile")), deg, bw, note)


HEADER = "%-44s %-7s %-13s %-3s %10s %9s %9s %-5s %-22s %s" % (
    "task", "level", "category", "ok", "best_ms", "vs_eager", "vs_comp", "degen", "bw/copy | mm/peak", "notes")


def print_aggregates(agg, meta):
    label = "" if meta.get("cuda") else " [CPU figures]"
    print("\n== aggregates%s (degenerate tasks excluded; no correct kernel = 1.0x) ==" % label)
    print("date %s  device %s  torch %s  triton %s  steps %s  copy bandwidth %s" % (
        meta.get("date"), meta.get("gpu"), meta.get("torch"), meta.get("triton"), meta.get("steps"),
        "%.0f GB/s" % (meta["copy_bps"] / 1e9) if meta.get("copy_bps") else "n/a"))
    if agg["degenerate_excluded"]:
        print("excluded as degenerate: %s" % ", ".join(agg["degenerate_excluded"]))
    if agg["degenerate_unknown"]:
        print("degeneracy unknown (counted): %s" % ", ".join(agg["degenerate_unknown"]))
    for level, a in agg["levels"].items():
        print("%-8s correct %d/%d = %.1f%%  geomean max(speedup,1): vs eager %s, vs compile %s" % (
            level, a["correct"], a["tasks"], a["correct_pct"], _x(a["geomean_eager"]), _x(a["geomean_compile"])))
        f = a["finished"]
        if f["tasks"] < a["tasks"]:
            print("%-8s   of these, the %d tasks the run finished: correct %d/%d, geomean vs eager %s, vs compile %s" % (
                "", f["tasks"], f["correct"], f["tasks"], _x(f["geomean_eager"]), _x(f["geomean_compile"])))
    m = agg["level1_memory_bound"]
    if m["tasks"]:
        cats = ", ".join("%s %d/%d" % (c, v["correct"], v["tasks"]) for c, v in m["by_category"].items() if v["tasks"])
        print("level1 memory-bound (%s): correct %d/%d = %.1f%%" % (cats, m["correct"], m["tasks"], m["correct_pct"]))
        if m["with_fraction"]:
            print("  bandwidth / copy over %d correct: median %.3f, min %.3f, >= %.2f: %d/%d" % (
                m["with_fraction"], m["median_fraction"], m["min_fraction"], BW_TARGET, m["at_least_0_80"],
                m["with_fraction"]))
            if m.get("with_gpu_fraction"):
                print("  the kernels alone (GPU busy time; %d with one): median %.3f, min %.3f, >= %.2f: %d/%d" % (
                    m["with_gpu_fraction"], m["median_gpu_fraction"], m["min_gpu_fraction"], BW_TARGET,
                    m["gpu_at_least_0_80"], m["with_gpu_fraction"]))
        else:
            print("  bandwidth fractions: n/a (%s)" % ("no correct kernel" if meta.get("cuda") else "CPU run"))
    mm = agg.get("matmul_roofline") or {}
    if mm.get("with_profile"):
        print("GEMMs and convolutions with a profile: %d, median %.2f of the fp32-accurate matmul peak" % (
            mm["with_profile"], mm["median_flops_fraction"]))
    for s in mm.get("slower", []):
        print("  slower than the baseline: %s: %s" % (s["task"], s["why"]))
    for level, s in (agg.get("generated_share") or {}).items():
        print("%-8s share of GPU time in generated kernels over %d profiled: median %.2f, >= %.2f: %d/%d" % (
            level, s["with_profile"], s["median"], GENERATED_TARGET, s["at_least_0_70"], s["with_profile"]))
    cv = agg.get("conv_vs_cudnn") or {}
    if cv.get("tasks"):
        print("generated convolutions vs the cuDNN plans of the same search (cuDNN time / generated time): "
              "%d tasks, geomean %.2fx, faster on %d" % (cv["tasks"], cv["geomean_ratio"], cv["faster"]))
        for s in cv["lose"]:
            print("  loses to cuDNN: %s (%.2fx)%s" % (s["task"], s["ratio"], ": " + s["why"] if s.get("why") else ""))
    gv = agg.get("graph_vs_launches") or {}
    if gv.get("tasks"):
        print("the forward from a CUDA graph vs launched kernel by kernel in the same search (launched time / "
              "graph time): %d tasks, geomean %.2fx, faster on %d" % (gv["tasks"], gv["geomean_ratio"], gv["faster"]))
    sv = agg.get("stats_vs_separate") or {}
    if sv.get("tasks"):
        print("norm statistics in the convolution's kernel vs a statistics kernel of their own in the same search "
              "(separate time / fused time): %d tasks, geomean %.2fx, faster on %d" % (
                  sv["tasks"], sv["geomean_ratio"], sv["faster"]))
    sys.stdout.flush()


# ---------------------------------------------------------------- running

class Stop(Exception):
    pass


def _on_signal(signum, _frame):
    raise Stop(signal.Signals(signum).name)


def run_bench(cmd, env, t0):
    """Runs the bench, streaming its stderr and stdout with elapsed seconds; returns the exit code
    (None when we were stopped by a signal)."""
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         errors="replace", bufsize=1)

    lock = threading.Lock()

    def pump(stream, tag):
        for line in stream:
            with lock:
                sys.stdout.write("[%7.1f s]%s %s\n" % (time.time() - t0, tag, line.rstrip()))
                sys.stdout.flush()

    threads = [threading.Thread(target=pump, args=(p.stderr, ""), daemon=True),
               threading.Thread(target=pump, args=(p.stdout, " >"), daemon=True)]
    for th in threads:
        th.start()
    try:
        while p.poll() is None:
            time.sleep(0.5)
    except Stop as e:
        print("[%7.1f s] bench/builtin: %s: stopping the bench and reporting what was stored" % (
            time.time() - t0, e), flush=True)
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for th in threads:
            th.join(2)
        return None
    for th in threads:
        th.join(5)
    print("[%7.1f s] bench exited with %d" % (time.time() - t0, p.returncode), flush=True)
    return p.returncode


def parse_only(text):
    """The categories of --only ("memory-bound" stands for the five memory-bound ones)."""
    known = {cat for cat, _ in _RULES} | {"other"}
    cats = set()
    for c in (x.strip() for x in text.split(",")):
        if c == "memory-bound":
            cats.update(MEMORY_BOUND)
        elif c in known:
            cats.add(c)
        elif c:
            raise SystemExit("bench/builtin: unknown category %r in --only (known: memory-bound, %s)" % (
                c, ", ".join(sorted(known))))
    return cats


def prepare_tasks(specs, out, only=None):
    """(spec for `bench`, [task files]): one spec is passed as is; several, or a selection by
    category (only: a set of categories), are merged into OUT/_tasks (symlinks)."""
    files = []
    for s in specs:
        files.extend(resolve_spec(s))
    if only is not None:
        files = [f for f in files if classify(f.name) in only]
        if not files:
            raise SystemExit("bench/builtin: no task of the categories %s" % ", ".join(sorted(only)))
    names = {}
    for f in files:
        if f.stem in names and os.path.realpath(names[f.stem]) != os.path.realpath(f):
            raise SystemExit("bench/builtin: two tasks named %s (%s, %s): bench names tasks by file stem" % (
                f.stem, names[f.stem], f))
        names[f.stem] = f
    if len(specs) == 1 and only is None:
        return specs[0], list(names.values())
    d = Path(out) / "_tasks"
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.py"):
        old.unlink()
    for stem, f in names.items():
        link = d / (stem + ".py")
        try:
            link.symlink_to(Path(f).resolve())
        except OSError:
            link.write_bytes(Path(f).read_bytes())
    return str(d), list(names.values())


def check_degenerate(binary, tasks, out, device, env, timeout=900):
    """{name: [kinds]} from `adaexplore tasks --json` for tasks no verdict covers."""
    if not tasks:
        return {}
    d = Path(out) / "_degen_check"
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.py"):
        old.unlink()
    for name, path in tasks.items():
        (d / (name + ".py")).symlink_to(Path(path).resolve())
    found = {}
    try:
        p = subprocess.run([binary, "tasks", str(d), "--json", "--device", device, "--tolerance", "strict"],
                           capture_output=True, text=True, timeout=timeout, env=env)
        for line in p.stdout.splitlines():
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("ok"):
                found[j["task"]] = list(j.get("degenerate") or [])
    except (subprocess.TimeoutExpired, OSError) as e:
        print("bench/builtin: degeneracy check failed: %s" % e, flush=True)
    return found


def env_info(store, summary_rows, device):
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cuda": device.startswith("cuda")}
    for entry in store.values():
        for v in entry.get("verdicts", []):
            e = v.get("env") or {}
            info.setdefault("torch", e.get("torch"))
            info.setdefault("triton", e.get("triton"))
            if v.get("device"):
                info.setdefault("gpu", v["device"])
    for r in summary_rows:
        if r.get("device"):
            info.setdefault("gpu", r["device"])
    try:
        import torch
        if not info.get("torch"):
            info["torch"] = torch.__version__
        if not info.get("gpu") and info["cuda"] and torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    except ImportError:
        pass
    if not info.get("triton"):
        try:
            import triton
            info["triton"] = triton.__version__
        except ImportError:
            info["triton"] = "?"
    info.setdefault("gpu", "cpu" if not info["cuda"] else device)
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="+", help="task folders, files, levelN/ID or kernelbench:ROOT:LEVEL:ID")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--bin", default=None, help="adaexplore binary (default build/adaexplore of this repo)")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", default=None, help="run folder (default runs/builtin-TIMESTAMP); resumed if it holds a run")
    ap.add_argument("--extra", default="", help="extra flags for `adaexplore bench` (shell-split)")
    ap.add_argument("--baselines", default=None, help="default eager,compile on GPU, eager on CPU")
    ap.add_argument("--categories", action="store_true",
                    help="only list each task's level, category and byte estimate; run nothing")
    ap.add_argument("--only", default=None,
                    help="run only tasks of these categories (comma list; memory-bound = elementwise, "
                         "normalisation, reduction, softmax, loss)")
    ap.add_argument("--report-only", action="store_true", help="do not run the bench; report OUT as it is")
    ap.add_argument("--no-degenerate-check", action="store_true",
                    help="do not ask `adaexplore tasks` about tasks no verdict covers")
    ap.add_argument("--copy-gib", type=float, default=1.0, help="size of the copy-bandwidth tensor")
    args = ap.parse_args(argv)

    t0 = time.time()
    cuda = args.device.startswith("cuda")
    if args.categories and not args.out:
        import tempfile
        out = tempfile.mkdtemp(prefix="bench-builtin-")
    else:
        out = args.out or str(ROOT / "runs" / ("builtin-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")))
    binary = args.bin or str(ROOT / "build" / "adaexplore")
    Path(out).mkdir(parents=True, exist_ok=True)
    spec, files = prepare_tasks(args.tasks, out, parse_only(args.only) if args.only else None)
    paths = {f.stem: f for f in files}

    # Bytes moved per memory-bound task (meta device: allocates nothing; RNN models are slow to
    # build there, so the others are only estimated for --categories).
    estimates = {}
    for name, path in paths.items():
        if not (args.categories or is_memory_bound(classify(name))):
            continue
        try:
            estimates[name] = estimate_bytes(path)
        except Exception as e:  # noqa: BLE001
            estimates[name] = (None, None, "%s: %s" % (type(e).__name__, first_line(str(e))))
    if args.categories:
        for name, path in paths.items():
            bi, bo, err = estimates[name]
            cat = classify(name)
            print("%-60s %-7s %-13s %-13s in %s out %s %s" % (
                name, level_of(path), cat, "memory-bound" if is_memory_bound(cat) else "",
                "%.3f GB" % (bi / 1e9) if bi is not None else "?", "%.3f GB" % (bo / 1e9) if bo is not None else "?",
                err))
        counts = {}
        for name in paths:
            counts[classify(name)] = counts.get(classify(name), 0) + 1
        print("categories: " + ", ".join("%s %d" % kv for kv in sorted(counts.items())))
        return 0

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    bw_file = Path(out) / "copy_bandwidth.json"
    copy_bps = None
    rc = None
    baselines = args.baselines or ("eager,compile" if cuda else "eager")
    try:
        if cuda:
            try:
                copy_bps = json.loads(bw_file.read_text())["bytes_per_s"] if args.report_only and bw_file.exists() \
                    else None
                if copy_bps is None:
                    copy_bps = measure_copy_bandwidth(args.device, args.copy_gib)
                    bw_file.write_text(json.dumps({"bytes_per_s": copy_bps, "device": args.device,
                                                   "gib": args.copy_gib}))
                print("[%7.1f s] copy bandwidth on %s: %.0f GB/s (2 x %.2f GiB per copy)" % (
                    time.time() - t0, args.device, copy_bps / 1e9, args.copy_gib), flush=True)
            except Exception as e:  # noqa: BLE001
                print("bench/builtin: copy bandwidth not measured: %s" % e, flush=True)
        if not args.report_only:
            cmd = [binary, "bench", spec, "--proposer", "builtin", "--steps", str(args.steps), "--jobs",
                   str(args.jobs), "--device", args.device, "--tolerance", "strict", "--baselines", baselines,
                   "--out", out]
            if (Path(out) / "run.sqlite").exists():
                cmd.append("--resume")
            cmd += shlex.split(args.extra)
            rc = run_bench(cmd, dict(os.environ), t0)
    except Stop as e:
        print("bench/builtin: %s before the bench finished" % e, flush=True)
    # From here on a second signal just ends the report early.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    summary = read_summary(out)
    checkpoint_store(out)
    store, config = read_store(out)
    rows = []
    for name, path in paths.items():
        r = task_row(name, path, summary.get(name), store.get(name))
        bi, bo, err = estimates.get(name, (None, None, ""))
        if bo is None and r.get("_verdict_outputs"):
            bo = output_bytes_from_shapes(r["_verdict_outputs"])
        r.pop("_verdict_outputs", None)
        r["bytes_in"], r["bytes_out"] = bi, bo
        r["bytes"] = bi + bo if bi is not None and bo is not None else None
        if err and r["bytes"] is None:
            r["bytes_error"] = err
        add_bandwidth(r, copy_bps if cuda else None)
        rows.append(r)

    unknown = {r["task"]: paths[r["task"]] for r in rows if r["degenerate"] is None}
    if unknown and not args.no_degenerate_check and Path(binary).exists():
        cache = Path(out) / "degenerate_check.json"
        known = json.loads(cache.read_text()) if cache.exists() else {}
        ask = {k: v for k, v in unknown.items() if k not in known}
        if ask:
            print("[%7.1f s] checking %d tasks without a verdict for degeneracy (adaexplore tasks)" % (
                time.time() - t0, len(ask)), flush=True)
            known.update(check_degenerate(binary, ask, out, args.device, dict(os.environ)))
            cache.write_text(json.dumps(known, indent=1))
        for r in rows:
            if r["degenerate"] is None and r["task"] in known:
                r["degenerate"], r["degenerate_kinds"] = bool(known[r["task"]]), known[r["task"]]

    meta = env_info(store, rows, args.device)
    meta.update(copy_bps=copy_bps, steps=config.get("steps", args.steps) if args.report_only else args.steps,
                out=out, bench_rc=rc)
    print("\n" + HEADER)
    for r in rows:
        print(format_row(r))
    agg = aggregate(rows, "compile" in baselines.split(","))
    print_aggregates(agg, meta)
    with open(Path(out) / "bench_builtin.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (Path(out) / "bench_builtin_summary.json").write_text(json.dumps({"meta": meta, "aggregates": agg}, indent=1))
    print("rows: %s/bench_builtin.jsonl; aggregates: %s/bench_builtin_summary.json" % (out, out), flush=True)
    if rc is None and not args.report_only:
        return 124
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())

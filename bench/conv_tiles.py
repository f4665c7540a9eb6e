#!/usr/bin/env python3
"""bench/conv_tiles: the tile space of the builtin compiler's generated convolutions, timed directly.

    python3 bench/conv_tiles.py TASK... [--bin build/adaexplore] [--device cuda:0] [--grid medium|full|small]
                                [--jobs 12] [--out FILE.jsonl] [--rep-ms 200]

For each task (a file, or KernelBench levelN/ID as `adaexplore` resolves it), `adaexplore compile
TASK --json` lists the compiler's large-step plans; the first plan that generates the task's
convolutions (`conv` true, input made channels-last) is taken, and every configuration of the
grid is given to each of its GEMMs and convolutions (`gemm`: [BM, BN, BK, GROUP_M, warps,
stages]) and generated with `adaexplore compile --plan`. The first plan (convolutions left to
cuDNN) and the task's own Model are timed beside them.

Each candidate is first built and run once in a pool of --jobs processes (Triton compiles there,
into its cache), then timed alone in this process: `triton.testing.do_bench` (L2 flushed before
each call, median over --rep-ms of calls), after a check of its output against the reference's
(fp32 strict: rtol = atol = 1e-4, the judge's preset; TF32 off on both sides). A configuration the
generator refuses, that fails to compile (shared memory, registers) or that is wrong is listed
with its reason.

Prints per task the configurations by time with TFLOP/s (2 * MACs of the task's convolutions,
counted by forward hooks, over the time of the whole forward) and the ratio to the cuDNN plan,
then the best configuration and the compiler's default (the plan as generated). Rows go to
--out (JSON lines). The timings are for choosing schedules; task figures come from bench/builtin.py.
"""

import argparse
import importlib.util
import itertools
import json
import math
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GRIDS = {
    # BM, BN, BK, (warps, stages); GROUP_M stays 8.
    "full": ([64, 128, 256], [32, 64, 128], [16, 32, 64], [(4, 2), (4, 3), (4, 4), (8, 2), (8, 3), (8, 4)]),
    "medium": ([64, 128, 256], [64, 128], [16, 32, 64], [(4, 3), (4, 4), (8, 3), (8, 4)]),
    "small": ([64, 128], [64, 128], [32, 64], [(4, 3), (8, 3), (8, 4)]),
}


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_json(binary, task, device, plans=None, out=None):
    cmd = [binary, "compile", task, "--device", device, "--json"]
    for p in plans or []:
        cmd += ["--plan", json.dumps(p)]
    if out:
        cmd += ["--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError(p.stderr.strip() or "adaexplore compile exited %d" % p.returncode)
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")], p.stderr.strip()


def grid_plans(base, grid, cout):
    bms, bns, bks, ws = GRIDS[grid]
    n_cap = max(16, 1 << max(0, math.ceil(math.log2(max(1, cout)))))
    plans = []
    for bm, bn, bk, (warps, stages) in itertools.product(bms, bns, bks, ws):
        bn = min(bn, n_cap)  # no wider than the output channels (rounded up to a power of two)
        if 4 * (bm + bn) * bk * stages > 200 * 1024:
            continue  # the pipelined fp32 tiles overflow shared memory (GemmSchedule::Valid)
        p = json.loads(json.dumps(base))
        p["gemm"] = [[bm, bn, bk, 8, warps, stages] for _ in base.get("gemm", [[0]])]
        if p not in plans:
            plans.append(p)
    return plans


def _build(path, device, want_ref=False, seed=0):
    """ModelNew (and with want_ref the task's Model) from a candidate file, on device, with the
    task's inputs; the same seed gives every candidate the same parameters and inputs."""
    import torch

    mod = load_module(path, "cand_%d" % (abs(hash(path)) % 10**8))
    torch.manual_seed(seed)
    inputs = [x.to(device) if hasattr(x, "to") else x for x in mod.get_inputs()]
    ref = None
    if want_ref:
        torch.manual_seed(seed)
        ref = mod.Model(*mod.get_init_inputs()).to(device).eval()
    torch.manual_seed(seed)
    new = mod.ModelNew(*mod.get_init_inputs()).to(device).eval()
    return mod, ref, new, inputs


def _warm(args):
    """Pool job: build and run a candidate once (Triton compiles into its cache)."""
    path, device = args
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        _, _, new, inputs = _build(path, device)
        with torch.no_grad():
            new(*inputs)
        torch.cuda.synchronize()
        return path, None
    except Exception as e:  # noqa: BLE001 - the reason is the result
        return path, "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:160] if str(e).strip() else "")


def conv_flops(ref, inputs):
    """2 * multiply-adds of every convolution in one forward (forward hooks)."""
    import torch

    total = [0]

    def hook(m, args, out):
        w = m.weight
        if isinstance(m, torch.nn.modules.conv._ConvTransposeNd):
            x = args[0]
            total[0] += 2 * x.numel() * w.shape[1] * math.prod(w.shape[2:])
        else:
            total[0] += 2 * out.numel() * w.shape[1] * math.prod(w.shape[2:])

    hs = [m.register_forward_hook(hook) for m in ref.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)]
    with torch.no_grad():
        ref(*inputs)
    for h in hs:
        h.remove()
    return total[0]


def time_candidate(path, device, expected, rep_ms):
    import torch
    import triton.testing

    _, _, new, inputs = _build(path, device)
    with torch.no_grad():
        got = new(*inputs)
        if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
            err = (got - expected).abs().max().item()
            return None, "wrong output (max abs error %.3g)" % err
        ms = triton.testing.do_bench(lambda: new(*inputs), rep=rep_ms, return_mode="median")
    return ms, None


def sweep(task, args, pool):
    import torch

    rows, err = compile_json(args.bin, task, args.device)
    if not rows:
        print("%s: %s" % (task, err or "no plans"))
        return []
    conv = [r for r in rows if r["plan"].get("conv") and not r["plan"].get("conv_native") and "error" not in r]
    if not conv:
        print("%s: no plan generates its convolutions" % task)
        return []
    base = conv[0]["plan"]
    with tempfile.TemporaryDirectory(prefix="conv_tiles_") as tmp:
        # The task's convolutions and their output channels, from the first plan's source.
        first_dir = os.path.join(tmp, "first")
        compile_json(args.bin, task, args.device, [rows[0]["plan"], base], first_dir)
        cudnn_path, default_path = os.path.join(first_dir, "plan_00.py"), os.path.join(first_dir, "plan_01.py")
        _, ref, _, inputs = _build(cudnn_path, args.device, want_ref=True)
        cout = max((m.out_channels for m in ref.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)), default=64)
        flops = conv_flops(ref, inputs)
        with torch.no_grad():
            expected = ref(*inputs)
        plans = grid_plans(base, args.grid, cout)
        gen_dir = os.path.join(tmp, "grid")
        generated, _ = compile_json(args.bin, task, args.device, plans, gen_dir)
        paths = {r["file"]: r for r in generated if "file" in r}
        t0 = time.time()
        warm = dict(pool.map(_warm, [(p, args.device) for p in [cudnn_path, default_path, *paths]]))
        print("%s: %d configurations built in %.0f s (%d processes)" % (task, len(paths), time.time() - t0, args.jobs))
        results = []
        ref_ms = triton_ms(ref, inputs, args.rep_ms)
        for label, path, plan in [("cudnn plan", cudnn_path, rows[0]["plan"]), ("default", default_path, base)] + [
                ("grid", p, r["plan"]) for p, r in paths.items()]:
            why = warm.get(path)
            ms = None
            if why is None:
                ms, why = time_candidate(path, args.device, expected, args.rep_ms)
            results.append({"task": Path(task).stem if os.path.exists(task) else task, "kind": label,
                            "gemm": plan.get("gemm"), "ms": ms, "error": why,
                            "tflops": flops / (ms * 1e9) if ms else None})
        for r in generated:
            if "error" in r:
                results.append({"task": results[0]["task"], "kind": "grid", "gemm": r["plan"].get("gemm"), "ms": None,
                                "error": "not generated: " + r["error"], "tflops": None})
    cudnn = results[0]["ms"]
    for r in results:
        r["vs_cudnn_plan"] = cudnn / r["ms"] if cudnn and r["ms"] else None
        r["eager_ms"] = ref_ms
    report(results, flops)
    return results


def triton_ms(model, inputs, rep_ms):
    import torch
    import triton.testing

    with torch.no_grad():
        return triton.testing.do_bench(lambda: model(*inputs), rep=rep_ms, return_mode="median")


def report(results, flops):
    task = results[0]["task"]
    ok = sorted([r for r in results if r["ms"] and r["kind"] == "grid"], key=lambda r: r["ms"])
    bad = [r for r in results if not r["ms"]]
    print("\n== %s: %.1f GFLOP of convolution per forward; eager %.3f ms ==" % (task, flops / 1e9, results[0]["eager_ms"]))
    print("%-12s %-28s %9s %8s %9s" % ("kind", "BM,BN,BK,GROUP_M,warps,stages", "ms", "TFLOP/s", "vs cuDNN"))
    for r in [x for x in results if x["kind"] != "grid"] + ok[:12]:
        print("%-12s %-28s %9s %8s %9s  %s" % (
            r["kind"], ",".join(map(str, r["gemm"][0])) if r["gemm"] else "-", "%.3f" % r["ms"] if r["ms"] else "-",
            "%.1f" % r["tflops"] if r["tflops"] else "-", "%.2fx" % r["vs_cudnn_plan"] if r["vs_cudnn_plan"] else "-",
            r["error"] or ""))
    print("timed %d of %d configurations; %d failed or refused (first: %s)" % (
        len(ok), len([r for r in results if r["kind"] == "grid"]), len([r for r in bad if r["kind"] == "grid"]),
        next((r["error"] for r in bad if r["kind"] == "grid"), "-")))
    if ok:
        d = next((r for r in results if r["kind"] == "default"), None)
        print("best %s: %.3f ms (%.2fx the cuDNN plan); default %s: %s" % (
            ok[0]["gemm"][0], ok[0]["ms"], ok[0]["vs_cudnn_plan"] or 0, d["gemm"][0] if d and d["gemm"] else "-",
            "%.3f ms" % d["ms"] if d and d["ms"] else (d or {}).get("error")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="medium")
    ap.add_argument("--jobs", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--rep-ms", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("bench/conv_tiles: needs a GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("%s, torch %s" % (torch.cuda.get_device_name(), torch.__version__), flush=True)
    all_rows = []
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for task in args.tasks:
            try:
                all_rows += sweep(task, args, pool)
            except Exception as e:  # noqa: BLE001 - one task's failure does not end the sweep
                print("%s: %s: %s" % (task, type(e).__name__, e))
            sys.stdout.flush()
            if args.out:
                with open(args.out, "w") as f:
                    for r in all_rows:
                        f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()

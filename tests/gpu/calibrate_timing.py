#!/usr/bin/env python3
"""Calibrates the judge's clock bound (docs/judge.md, "The judge's clock"). Each timing request
is timed the way the judge times it (the wall time from writing the request to reading the
reply), and each candidate's request comes right after the trusted measure of the loop alone
that the judge takes before it: the same request timed in a reference worker with a null model.
Candidates: a null candidate (its forward returns its input: the loop alone, in a candidate's
process with its guard) and honest ones. Prints per run the loop's cost per request and per call
in the reference worker (null model and eager baseline) and in the null candidate, and for each
candidate the excess of its request over the loop plus its claimed calls (what the judge's bound
must absorb for an honest candidate), the margin left under the bound, and the smallest factor a
forger could scale that candidate's times by and still pass.

Runs on the CPU (Triton's interpreter) and on a GPU; standard library only for the driver, the
workers run under ADAEXPLORE_PYTHON (default .venv/bin/python, else python3):

    calibrate_timing.py [--device cpu|cuda:0] [--reps 5] [--iters 3,20] [--warmup N]
                        [--task FILE] [--candidate FILE ...] [--json OUT]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "examples" / "tasks" / "1_BiasReLUScale.py"
HONEST = [ROOT / "tests" / "corpus" / "honest" / "fused_triton.py",
          ROOT / "tests" / "corpus" / "honest" / "torch_plus_own_kernel.py"]
NULL_CANDIDATE = '''
import torch.nn as nn


class ModelNew(nn.Module):
    """The loop alone: no work at all."""

    def __init__(self, *args):
        super().__init__()

    def forward(self, x, *rest):
        return x
'''
TOLERANCE = {"float32": [1e-4, 1e-4], "float16": [1e-2, 1e-2], "bfloat16": [1e-2, 1e-2],
             "float64": [1e-4, 1e-4], "default": [1e-4, 1e-4]}


def judge_bound(cuda):
    """The judge's bound as src/judge/timing_rules.cpp sets it (ClockBoundFor): rel, fixed_ms,
    per_call_ms, loop_rel."""
    text = (ROOT / "src" / "judge" / "timing_rules.cpp").read_text()
    m = re.search(r"if \(cuda\) return \{([^}]*)\};\s*return \{([^}]*)\};", text)
    if not m:
        raise SystemExit("cannot read the bound from src/judge/timing_rules.cpp (ClockBoundFor)")
    return tuple(float(x) for x in m.group(1 if cuda else 2).split(","))


class Worker:
    """One worker process spoken to as the judge does (docs/worker-protocol.md), without the
    sandbox: requests on stdin, replies on descriptor 3."""

    def __init__(self, role, python, device, scratch):
        read_fd, write_fd = os.pipe()
        env = dict(os.environ, ADAEXPLORE_PROTO_FD="3", PYTHONPATH=str(ROOT / "python"), HOME=scratch,
                   TMPDIR=scratch, TRITON_CACHE_DIR=os.path.join(scratch, "triton"))
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"

        def child_fds():
            os.dup2(write_fd, 3)

        self.log = open(os.path.join(scratch, role + ".log"), "wb")
        self.proc = subprocess.Popen([python, "-m", "adaexplore_worker", role], stdin=subprocess.PIPE,
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=scratch, env=env,
                                     preexec_fn=child_fds, close_fds=False)
        os.close(write_fd)
        self.replies = os.fdopen(read_fd, "r")
        ready = json.loads(self.replies.readline() or "{}")
        if not ready.get("ok"):
            raise SystemExit("the %s worker did not start; see %s" % (role, self.log.name))

    def request(self, req):
        """The reply and the request's wall time in milliseconds."""
        t0 = time.perf_counter()
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        line = self.replies.readline()
        ms = (time.perf_counter() - t0) * 1e3
        if not line:
            raise SystemExit("the worker died during %s; see %s" % (req.get("op"), self.log.name))
        reply = json.loads(line)
        if not reply.get("ok"):
            raise SystemExit("%s failed: %s" % (req.get("op"), str(reply.get("error"))[:2000]))
        return reply, ms

    def close(self):
        try:
            self.proc.stdin.write(b'{"op": "exit"}\n')
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
        self.log.close()


def median(xs):
    return statistics.median(xs) if xs else 0.0


def summary(xs):
    return "mean %8.3f  sd %7.3f  min %8.3f  max %8.3f" % (
        statistics.fmean(xs), statistics.pstdev(xs), min(xs), max(xs))


def timing_request(op, warmup, iters, sets, flush, seed):
    return {"op": op, "set_seeds": [seed + 1000 + i for i in range(sets)], "refresh_seed0": seed + 5000,
            "warmup": warmup, "iters": iters, "flush_bytes": flush}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--python", default=os.environ.get("ADAEXPLORE_PYTHON") or (
        str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else "python3"))
    ap.add_argument("--task", default=str(TASK))
    ap.add_argument("--candidate", action="append", default=[])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", default="", help="comma-separated timed-call counts (default: the judge's)")
    ap.add_argument("--warmup", type=int, default=-1)
    ap.add_argument("--sets", type=int, default=3)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    local = "cuda:0" if cuda else "cpu"
    warmup = args.warmup if args.warmup >= 0 else (10 if cuda else 2)
    iters_list = [int(x) for x in args.iters.split(",") if x] or [50 if cuda else 5]
    flush = (256 << 20) if cuda else 0
    rel, fixed, per_call, loop_rel = judge_bound(cuda)
    candidates = [Path(c) for c in args.candidate] or HONEST
    if cuda and "CUDA_VISIBLE_DEVICES" not in os.environ and ":" in args.device:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.device.split(":")[1]
    scratch = tempfile.mkdtemp(prefix="adaexplore-calibrate-")
    results = {"device": args.device, "warmup": warmup, "sets": args.sets, "reps": args.reps,
               "date": time.strftime("%Y-%m-%d"), "runs": []}
    workers = []
    try:
        task = os.path.join(scratch, "task.py")
        shutil.copy(args.task, task)
        null = os.path.join(scratch, "null.py")
        Path(null).write_text(NULL_CANDIDATE)
        ref = Worker("reference", args.python, args.device, scratch)
        workers.append(ref)
        ref.request({"op": "load_task", "key": "t", "task": task, "device": local, "init_seed": 42,
                     "probe_seeds": [101, 202], "tolerance": TOLERANCE})
        cands = {}
        for path in [Path(null)] + candidates:
            w = Worker("candidate", args.python, args.device, scratch)
            workers.append(w)
            copy = os.path.join(scratch, "c_%d.py" % len(cands))
            shutil.copy(path, copy)
            w.request({"op": "load", "task": task, "candidate": copy, "device": local, "init_seed": 42,
                       "warm_seed": 7, "extensions_dir": os.path.join(scratch, "ext")})
            cands["null" if path == Path(null) else path.stem] = w
        gpu = ref.request({"op": "hello", "device": args.device})[0].get("gpu")
        results["gpu"] = gpu
        print("device %s%s, warm-up %d, %d input sets, %d repetitions, %s" % (
            args.device, " (%s)" % gpu if gpu else "", warmup, args.sets, args.reps, results["date"]))
        for iters in iters_list:
            calls = warmup + iters
            loop = {"null model": [], "eager": [], "null candidate": []}
            excess = {name: [] for name in cands}
            margin = {name: [] for name in cands}
            claims = {name: [] for name in cands}
            truth = {name: [] for name in cands}
            for rep in range(args.reps):
                seed = 1000003 * (rep + 1)
                r, ms = ref.request(dict(timing_request("baseline", warmup, iters, args.sets, flush, seed),
                                         key="t", mode="eager"))
                loop["eager"].append(ms - calls * median(r["stream_ms"]))
                for name, w in cands.items():
                    # As the judge does: the loop alone in the trusted worker, then the candidate.
                    req = timing_request("time", warmup, iters, args.sets, flush, seed)
                    _, null_ms = ref.request(dict(req, op="baseline", key="t", mode="null"))
                    r, ms = w.request(req)
                    claim = calls * median(r["stream_ms"])
                    loop["null model"].append(null_ms)
                    if name == "null":
                        loop["null candidate"].append(ms - claim)
                    excess[name].append(ms - null_ms - claim)
                    margin[name].append(rel * claim + fixed + per_call * calls + loop_rel * null_ms
                                        - (ms - null_ms - claim))
                    claims[name].append(claim)
                    truth[name].append(ms - null_ms)
            print("\n%d timed + %d warm-up calls per request" % (iters, warmup))
            print("  the loop's cost (ms): a request minus its calls at their median")
            for name, xs in loop.items():
                print("  %-24s per request %s | per call %7.3f" % (name, summary(xs), statistics.fmean(xs) / calls))
            print("  bound: %.0f%% of the claim + %.1f ms + %.2f ms/call + %.0f%% of the loop" % (
                rel * 100, fixed, per_call, loop_rel * 100))
            run = {"iters": iters, "calls": calls, "loop_ms": loop, "candidates": {}}
            for name in cands:
                claim = statistics.fmean(claims[name]) / calls
                allowance = fixed + per_call * calls + loop_rel * statistics.fmean(loop["null model"])
                true_calls = statistics.fmean(truth[name])
                # A forger passes while f x claim x (1 + rel) + allowance >= what its calls took.
                f_min = max(0.0, (true_calls - allowance) / ((1 + rel) * calls * claim)) if claim > 0 else 0.0
                run["candidates"][name] = {"median_ms": claim, "excess_ms": excess[name], "margin_ms": margin[name],
                                           "smallest_passing_scale": f_min}
                print("  %-24s claim %8.3f ms/call | excess over loop + claim %s | min margin %7.3f ms | "
                      "a forger passes down to x%.2f" % (name, claim, summary(excess[name]), min(margin[name]), f_min))
            results["runs"].append(run)
    finally:
        for w in workers:
            w.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

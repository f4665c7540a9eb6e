#!/usr/bin/env python3
"""bench/profile: the judge's per-kernel GPU profile, checked on real tasks.

    python3 bench/profile.py TASKS [--steps 3] [--device cuda:0]
                             [--bin build/adaexplore] [--out DIR] [--jobs N] [--json OUT.json]

TASKS is what `adaexplore bench` takes (a task folder, a file, levelN/ID). Runs
`adaexplore bench TASKS --proposer builtin --steps N` and reads every timed verdict in its
run store. For each it prints the busy time (the sum of the GPU activities' durations in the
median profiled call), the sum of the per-kernel times, how far apart the two are, the kernel
count, the longest kernel's share, and the roofline: the achieved bandwidth and FLOP/s as
fractions of the device's measured copy bandwidth and fp32 matrix-product rate, and which of
the two bounds the task; beside them the timed median (CUDA events around the timed calls, which
also count launch gaps; the busy time is the profiler's, with the L2 flushed). The kernels' times must add up to the busy time within 5%; the script
exits 1 when one does not.
"""

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tasks", help="a task folder, a task file, levelN/ID (as adaexplore bench takes)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--bin", default=str(Path(__file__).resolve().parents[1] / "build" / "adaexplore"))
    ap.add_argument("--out", default="runs/bench-profile")
    ap.add_argument("--jobs", type=int, default=1, help="tasks searched at once (timing stays exclusive)")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()

    cmd = [a.bin, "bench", a.tasks, "--proposer", "builtin", "--steps", str(a.steps), "--device", a.device,
           "--out", a.out, "--jobs", str(a.jobs), "--no-cache"]
    if Path(a.out, "run.sqlite").exists():
        cmd.append("--resume")
    print("$", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd)
    if rc != 0:
        print("bench exited %d" % rc, file=sys.stderr)
        return rc

    db = sqlite3.connect(os.path.join(a.out, "run.sqlite"))
    rows = []
    for task, verdict in db.execute("SELECT task, verdict FROM verdicts ORDER BY task"):
        v = json.loads(verdict)
        p = v.get("profile")
        if not p or not p.get("kernels"):
            continue
        busy = v.get("gpu_busy_ms")
        total = sum(k["ms"] for k in p["kernels"])
        rl = p.get("roofline") or {}
        rows.append({"task": task, "status": v["status"], "runtime_ms": v.get("runtime_ms"), "gpu_busy_ms": busy,
                     "kernels_ms": total, "gap": abs(total - busy) / busy if busy else None,
                     "kernels": len(p["kernels"]), "top": p["kernels"][0]["name"], "top_share": p["kernels"][0]["share"],
                     "bound": rl.get("bound"), "bandwidth_fraction": rl.get("bandwidth_fraction"),
                     "flops_fraction": rl.get("flops_fraction"), "peak_gbps": rl.get("peak_gbps"),
                     "peak_tflops": rl.get("peak_tflops"), "device": v.get("device")})
    if not rows:
        print("no profiled verdict in %s (not a GPU?)" % a.out, file=sys.stderr)
        return 1
    print("%-36s %9s %9s %6s %9s %3s %6s  %-8s %6s %6s  %s" % ("task", "busy ms", "sum ms", "gap", "timed ms", "k",
                                                              "top", "bound", "bw", "flops", "longest kernel"))
    for r in rows:
        print("%-36s %9.4f %9.4f %5.1f%% %9.4f %3d %5.0f%%  %-8s %5.0f%% %5.0f%%  %s" % (
            r["task"][:36], r["gpu_busy_ms"], r["kernels_ms"], 100 * (r["gap"] or 0), r["runtime_ms"] or 0, r["kernels"],
            100 * r["top_share"], r["bound"] or "-", 100 * (r["bandwidth_fraction"] or 0),
            100 * (r["flops_fraction"] or 0), r["top"][:60]))
    worst = max(r["gap"] or 0 for r in rows)
    peaks = next((r for r in rows if r["peak_gbps"]), None)
    if peaks:
        print("device: %s, measured copy bandwidth %.0f GB/s, fp32-accurate matmul %.1f TFLOP/s" % (
            peaks["device"], peaks["peak_gbps"], peaks["peak_tflops"]))
    print("%d profiled verdicts over %d tasks; the kernels' times add up to the busy time within %.2f%%" % (
        len(rows), len({r["task"] for r in rows}), 100 * worst))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"rows": rows, "worst_gap": worst, "command": cmd}, indent=1))
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())

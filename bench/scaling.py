#!/usr/bin/env python3
"""bench/scaling: one bench on one GPU, on every GPU of the host, and through a
broker with one worker per GPU; wall times and whether the speedups agree.

    scaling.py --tasks DIR [--steps 8] [--limit N] [--jobs 1] [--seed 1] [--out FILE]

1. `bench --device cuda:0` and `bench --device all` (--jobs tasks per device):
   the wall-time ratio (the target on two GPUs: 1.8x or more).
2. A local redis-server, one `adaexplore worker --device cuda:I` per GPU, and
   the same bench with `--judge redis://...`: its wall time against
   `--device all` (the target: within 5%).
3. Agreement: each task's best speedups (vs eager and torch.compile) of the
   multi-GPU and broker runs against the single-GPU run; and the single-GPU
   run's best kernels judged again on every GPU (`batch --device cuda:I`), so
   that the same candidates' times on the different devices compare directly.

Every run has a cache of its own (nothing judged is reused between runs). All
runs use the builtin proposer, strict tolerance, the same search seed.
"""

import argparse
import datetime
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gpus():
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    n = len([x for x in vis.split(",") if x.strip()]) if vis else len(out)
    return n, (out[0] if out else "?")


def run_bench(args, tasks, out, extra, cache, log):
    env = dict(os.environ, ADAEXPLORE_CACHE_DIR=str(cache))
    env.pop("ADAEXPLORE_JUDGE", None)
    cmd = [args.bin, "bench", str(tasks), "--proposer", "builtin", "--steps", str(args.steps), "--seed",
           str(args.seed), "--jobs", str(args.jobs), "--out", str(out)] + extra
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.time()
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, env=env)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit("bench failed (%d); see %s" % (p.returncode, log))
    summary = json.loads((Path(out) / "summary.json").read_text())
    return wall, {t["task"]: t for t in summary["tasks"]}


def speedups(task):
    v = task.get("best_verdict") or {}
    return v.get("speedup", {}) if task.get("status") == "found" else {}


def agreement(a, b):
    """|log(b/a)| per task and baseline, for tasks both found."""
    out = []
    for name, ta in a.items():
        sa, sb = speedups(ta), speedups(b.get(name, {}))
        for k in ("eager", "compile"):
            if k in sa and k in sb and sa[k] > 0 and sb[k] > 0:
                out.append(abs(math.log(sb[k] / sa[k])))
    if not out:
        return None
    out.sort()
    return {"pairs": len(out), "median_pct": 100 * (math.exp(statistics.median(out)) - 1),
            "p90_pct": 100 * (math.exp(out[int(0.9 * (len(out) - 1))]) - 1), "max_pct": 100 * (math.exp(out[-1]) - 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bin", default=os.environ.get("ADAEXPLORE_BIN", str(ROOT / "build" / "adaexplore")))
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--work", help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--out", help="append the figures as JSON lines")
    args = ap.parse_args()
    n, gpu = gpus()
    if n < 2:
        print("note: %d GPU visible; the figures need two or more" % n)
    work = Path(args.work or tempfile.mkdtemp(prefix="ax-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    tasks = Path(args.tasks)
    if args.limit:
        sel = work / "tasks"
        sel.mkdir(exist_ok=True)
        for f in sorted(tasks.glob("*.py"), key=lambda p: (int(p.name.split("_")[0]) if p.name.split("_")[0].isdigit() else 1 << 30, p.name))[: args.limit]:
            shutil.copy(f, sel / f.name)
        tasks = sel
    rows = []
    one_wall, one = run_bench(args, tasks, work / "one", ["--device", "cuda:0"], work / "cache-one", work / "one.log")
    all_wall, allg = run_bench(args, tasks, work / "all", ["--device", "all"], work / "cache-all", work / "all.log")
    print("bench on cuda:0: %.1f s; on all %d GPUs: %.1f s; ratio %.2fx" % (one_wall, n, all_wall, one_wall / all_wall))
    # One worker per GPU behind a local broker.
    port = free_port()
    redis = subprocess.Popen([args.redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--dir", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "redis://127.0.0.1:%d" % port
    time.sleep(1)
    workers = []
    try:
        for i in range(n):
            log = open(work / ("worker%d.log" % i), "w")
            env = dict(os.environ, ADAEXPLORE_CACHE_DIR=str(work / "cache-broker"))
            workers.append(subprocess.Popen([args.bin, "worker", "--broker", url, "--device", "cuda:%d" % i, "--name",
                                             "gpu%d" % i, "--jobs", str(args.jobs)], stdout=log,
                                            stderr=subprocess.STDOUT, env=env, start_new_session=True))
        deadline = time.time() + 300
        while time.time() < deadline and not all("serving" in (work / ("worker%d.log" % i)).read_text()
                                                  for i in range(n)):
            time.sleep(0.5)
        br_wall, broker = run_bench(args, tasks, work / "broker", ["--judge", url], work / "cache-client",
                                    work / "broker.log")
    finally:
        for w in workers:
            os.killpg(w.pid, signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(w.pid, signal.SIGKILL)
        redis.kill()
    print("bench through the broker (%d workers, one per GPU): %.1f s; %.3f of --device all's wall time"
          % (n, br_wall, br_wall / all_wall))
    ag_all, ag_broker = agreement(one, allg), agreement(one, broker)
    for name, ag in (("all GPUs", ag_all), ("broker", ag_broker)):
        if ag:
            print("best speedups, %s vs cuda:0: %d pairs, median difference %.1f%%, p90 %.1f%%, max %.1f%%"
                  % (name, ag["pairs"], ag["median_pct"], ag["p90_pct"], ag["max_pct"]))
    # The same candidates (cuda:0's best kernels) judged on every GPU.
    manifest = work / "best.jsonl"
    lines = []
    for name, t in one.items():
        best = work / "one" / name / "best.py"
        if t.get("status") == "found" and best.exists():
            lines.append(json.dumps({"task": t.get("path") or str(tasks / (name + ".py")), "candidate": str(best)}))
    manifest.write_text("\n".join(lines) + "\n")
    per_device = {}
    for i in range(n):
        env = dict(os.environ, ADAEXPLORE_CACHE_DIR=str(work / ("cache-same%d" % i)))
        p = subprocess.run([args.bin, "batch", str(manifest), "--device", "cuda:%d" % i, "--jobs", "1"],
                           capture_output=True, text=True, env=env)
        per_device[i] = {json.loads(l)["task"]["name"]: json.loads(l) for l in p.stdout.splitlines()
                         if l.startswith("{") and "task" in json.loads(l)}
    same = []
    if n >= 2:
        for name, v0 in per_device[0].items():
            v1 = per_device[1].get(name)
            if v0.get("runtime_ms") and v1 and v1.get("runtime_ms"):
                same.append(abs(math.log(v1["runtime_ms"] / v0["runtime_ms"])))
        if same:
            same.sort()
            print("the same %d kernels on cuda:0 and cuda:1: runtime differs by median %.1f%%, max %.1f%%"
                  % (len(same), 100 * (math.exp(statistics.median(same)) - 1), 100 * (math.exp(same[-1]) - 1)))
    found = {k: sum(1 for t in r.values() if t.get("status") == "found") for k, r in
             (("one", one), ("all", allg), ("broker", broker))}
    row = {"date": datetime.date.today().isoformat(), "gpu": gpu, "gpus": n, "tasks": len(one), "steps": args.steps,
           "jobs_per_device": args.jobs, "wall_one_s": one_wall, "wall_all_s": all_wall, "wall_broker_s": br_wall,
           "ratio_all": one_wall / all_wall, "broker_vs_all": br_wall / all_wall, "found": found,
           "agreement_all": ag_all, "agreement_broker": ag_broker,
           "same_kernels_median_pct": (100 * (math.exp(statistics.median(same)) - 1)) if same else None,
           "per_task": {name: {"one": speedups(one[name]), "all": speedups(allg.get(name, {})),
                               "broker": speedups(broker.get(name, {}))} for name in one}}
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
    print(json.dumps({k: row[k] for k in ("ratio_all", "broker_vs_all", "found")}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/judge: the judge's throughput and timing noise on a GPU.

1. Throughput: COUNT KernelBench tasks x VARIANTS distinct Triton candidates
   (the reference plus an identity kernel, bench/make_reference_candidates.py)
   through one judge pool (`adaexplore batch`), full protocol, cold caches
   (Triton, inductor, baselines, verdicts). The candidates' wall time includes
   the tasks' baselines (eager + torch.compile), measured as candidates need
   them; the up-front task checks are printed separately.
2. Noise: one candidate judged REPEAT times in separate `adaexplore eval`
   calls (fresh seeds, baselines from the cache): max/min of the medians.

    judge.py --tasks DIR [--count 10] [--variants 5] [--jobs 4] [--device cuda:0] [--bin build/adaexplore]
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--variants", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--extra", default="", help="extra flags for the judge")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    env = dict(os.environ, ADAEXPLORE_CACHE_DIR=str(work / "cache"))
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_reference_candidates.py"), args.tasks, str(work / "c"),
                    "--variants", str(args.variants), "--limit", str(args.count)], check=True)
    t0 = time.time()
    # Verdicts stream as they finish, so a run cut short still shows its figures.
    p = subprocess.Popen([args.bin, "batch", str(work / "c" / "manifest.jsonl"), "--device", args.device,
                          "--jobs", str(args.jobs)] + args.extra.split(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    err_lines = []

    def pump_err():
        for line in p.stderr:
            err_lines.append(line)
            print("  [%6.1f s] %s" % (time.time() - t0, line.rstrip()), flush=True)

    import threading
    th = threading.Thread(target=pump_err, daemon=True)
    th.start()
    verdicts = []
    for line in p.stdout:
        if not line.strip():
            continue
        v = json.loads(line)
        verdicts.append(v)
        ph = v.get("phases", {})
        print("  [%6.1f s] %-60s %-10s judge %.1f s (%s)" % (
            time.time() - t0, Path(v.get("candidate", {}).get("path", "?")).name[:60], v.get("status"),
            v.get("judge_seconds", 0), ", ".join("%s %.2f" % kv for kv in sorted(ph.items()))), flush=True)
    p.wait()
    th.join(5)
    total = time.time() - t0
    if p.returncode != 0:
        sys.exit("batch failed: " + "".join(err_lines)[-3000:])
    m = re.search(r"batch: (\d+) candidates in ([\d.]+) s .*task checks ([\d.]+) s", "".join(err_lines))
    n, cand_s, prep_s = int(m.group(1)), float(m.group(2)), float(m.group(3))
    phases = {}
    for v in verdicts:
        for k, x in v.get("phases", {}).items():
            phases.setdefault(k, []).append(x)
    statuses = {}
    for v in verdicts:
        statuses[v["status"]] = statuses.get(v["status"], 0) + 1
    v0 = next((v for v in verdicts if v.get("status") == "ok"), verdicts[0])
    env_info = v0.get("env", {})
    print("bench/judge  %s  GPU %s  torch %s  triton %s  tolerance %s" % (
        datetime.date.today(), v0.get("device"), env_info.get("torch"), env_info.get("triton"),
        v0.get("protocol", {}).get("tolerance")))
    print("throughput: %d candidates (%d tasks x %d variants) in %.1f s through the pool (jobs=%d), baselines included: "
          "%.1f s per candidate, %.1f candidates per GPU-minute" % (n, len({v["task"]["hash"] for v in verdicts if "task" in v}), args.variants, cand_s, args.jobs, cand_s / max(n, 1),
                                              60.0 * n / cand_s))
    print("up front: task checks %.1f s; whole command %.1f s" % (prep_s, total))
    transfer = {}
    for v in verdicts:
        transfer[v.get("output_transfer", "none")] = transfer.get(v.get("output_transfer", "none"), 0) + 1
    print("output transfer to the reference: %s" % transfer)
    print("statuses: %s" % statuses)
    print("mean seconds per candidate by phase: %s (load overlaps other candidates' device work)" % ", ".join(
        "%s %.2f" % (k, sum(x) / len(x)) for k, x in sorted(phases.items())))
    for v in verdicts:
        if v["status"] != "ok":
            print("  not ok: %s %s: %s" % (Path(v["candidate"]["path"]).name, v["status"], v["error"][:300].replace("\n", " ")))
    # Noise: the same candidate, separate judge calls.
    task, cand = v0["task"]["path"], v0["candidate"]["path"]
    medians = []
    for i in range(args.repeat):
        q = subprocess.run([args.bin, "eval", task, cand, "--device", args.device, "--json", "--seed", str(1000 + i)]
                           + args.extra.split(), capture_output=True, text=True, env=env)
        v = json.loads(q.stdout.strip().splitlines()[-1])
        medians.append(v["runtime_ms"])
    print("noise: %s judged %d times: medians %s ms; max/min %.3f" % (
        Path(cand).name, args.repeat, ", ".join("%.4f" % x for x in medians), max(medians) / min(medians)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The judge's self-check: every task of a KernelBench folder judged with the
reference itself as the candidate (plus an identity kernel of its own). Each
must come out correct with a speedup near 1.0.

    selfcheck.py TASK_DIR [--device cuda:0] [--jobs 2] [--extra "--trials 2"] [--bin build/adaexplore]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--extra", default="")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="selfcheck-"))
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_reference_candidates.py"), args.tasks, str(work),
                    "--limit", str(args.limit)], check=True)
    p = subprocess.run([args.bin, "batch", str(work / "manifest.jsonl"), "--device", args.device, "--jobs",
                        str(args.jobs)] + args.extra.split(), capture_output=True, text=True)
    sys.stderr.write(p.stderr[-2000:])
    if p.returncode != 0:
        sys.exit(p.returncode)
    verdicts = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    ok = [v for v in verdicts if v.get("status") == "ok"]
    sp = [v["speedup"]["eager"] for v in ok if "eager" in v.get("speedup", {})]
    for v in verdicts:
        name = v.get("task", {}).get("name", "?")
        if v.get("status") == "ok":
            print("ok    %-55s %9.4f ms  x%.3f%s" % (name, v["runtime_ms"], v["speedup"].get("eager", 0),
                                                  "  " + ",".join(v["flags"]) if v["flags"] else ""))
        else:
            print("FAIL  %-55s %s: %s" % (name, v.get("status"), (v.get("error") or "")[:400].replace("\n", " | ")))
    if sp:
        print("speedup vs eager over %d correct: median %.3f, min %.3f, max %.3f" % (
            len(sp), statistics.median(sp), min(sp), max(sp)))
    print("%d passed, %d failed" % (len(ok), len(verdicts) - len(ok)))


if __name__ == "__main__":
    main()

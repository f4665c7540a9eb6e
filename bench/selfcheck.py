#!/usr/bin/env python3
"""The judge's self-check: every task of a KernelBench folder judged with the
reference itself as the candidate (plus a one-element kernel of its own on
every call). Each must come out correct with a speedup near 1.0.

    selfcheck.py TASK_DIR [--device cuda:0] [--jobs 2] [--extra "--trials 2"] [--bin build/adaexplore]
                 [--save verdicts.jsonl] [--kernel trivial|identity]
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


def report(v):
    name = v.get("task", {}).get("name", "?")
    if v.get("status") == "ok":
        print("ok    %-55s %9.4f ms  x%.3f%s" % (name, v["runtime_ms"], v["speedup"].get("eager", 0),
                                              "  " + ",".join(v["flags"]) if v["flags"] else ""))
    else:
        print("FAIL  %-55s %s: %s" % (name, v.get("status"), (v.get("error") or "")[:400].replace("\n", " | ")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--extra", default="")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--save", default="", help="write every verdict (JSON lines) here")
    ap.add_argument("--kernel", choices=["trivial", "identity"], default="trivial")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="selfcheck-"))
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_reference_candidates.py"), args.tasks, str(work),
                    "--limit", str(args.limit), "--kernel", args.kernel], check=True)
    # Verdicts stream out one line each as they finish, so a run cut short still shows what it judged.
    p = subprocess.Popen([args.bin, "batch", str(work / "manifest.jsonl"), "--device", args.device, "--jobs",
                          str(args.jobs)] + args.extra.split(), stdout=subprocess.PIPE, text=True)
    verdicts = []
    with open(args.save or os.devnull, "w") as saved:
        for line in p.stdout:
            if not line.strip():
                continue
            v = json.loads(line)
            verdicts.append(v)
            saved.write(line)
            saved.flush()
            report(v)
            sys.stdout.flush()
    rc = p.wait()
    ok = [v for v in verdicts if v.get("status") == "ok"]
    sp = [v["speedup"]["eager"] for v in ok if "eager" in v.get("speedup", {})]
    if sp:
        print("speedup vs eager over %d correct: median %.3f, min %.3f, max %.3f" % (
            len(sp), statistics.median(sp), min(sp), max(sp)))
    print("%d passed, %d failed" % (len(ok), len(verdicts) - len(ok)))
    if rc != 0:  # batch's own one-line reason is on stderr above
        sys.exit(rc)


if __name__ == "__main__":
    main()

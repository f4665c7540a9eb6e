#!/usr/bin/env python3
"""bench/plan_ab: one plan key of the builtin compiler, judged on and off, side by side.

    python3 bench/plan_ab.py TASK... --key convstats [--bin build/adaexplore] [--device cuda:0]
                             [--out DIR] [--trials 3] [--iters 30] [--warmup 5]
    python3 bench/plan_ab.py --rows DIR/verdicts.jsonl     (print the table of a finished run again)

For each task (a file, or KernelBench levelN/ID as `adaexplore` resolves it), `adaexplore compile
TASK --json` lists the compiler's large-step plans; the first plan with --key set is "with", and
the same plan with the key removed is "without" (tiles, norm epilogues and every other key stay).
Both are generated with `adaexplore compile --plan` into DIR, and one `adaexplore batch` judges
them all (strict tolerance, eager baseline) on the same device, alternating with and without.
A task without such a plan is listed and skipped.

Prints per task the judged time of both, with / without (below 1: the key helps), the eager
baseline, and the geometric mean of with / without over the tasks where both are correct. The
verdicts go to DIR/verdicts.jsonl (the batch's JSON lines).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pair(plans, key):
    """The first plan with `key` set and that plan without it, or None."""
    for p in plans:
        if p.get(key):
            without = {k: v for k, v in p.items() if k != key}
            return p, without
    return None


def list_plans(binary, task, device):
    out = subprocess.run([binary, "compile", task, "--device", device, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{task}: adaexplore compile failed: {out.stderr.strip().splitlines()[-1:]}")
    return [json.loads(line)["plan"] for line in out.stdout.splitlines() if line.startswith("{")]


def generate(binary, task, device, plan, path):
    out = subprocess.run([binary, "compile", task, "--device", device, "--plan", json.dumps(plan)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{task}: adaexplore compile --plan failed: {out.stderr.strip()}")
    Path(path).write_text(out.stdout)


def side_of(verdict):
    name = Path(verdict.get("candidate", {}).get("path", "")).stem
    return "with" if name.endswith("_with") else "without" if name.endswith("_without") else None


def table(verdicts, key):
    """The printed table: one row per task, then the geometric mean."""
    by_task = {}
    for v in verdicts:
        side = side_of(v)
        if side is None:
            continue
        t = v.get("task") or {}
        task = t.get("name") or Path(t.get("path", "?")).stem
        by_task.setdefault(task, {})[side] = v
    lines = [f"{'task':44s} {'with ms':>9s} {'without ms':>10s} {'with/without':>12s} {'eager ms':>9s}"]
    ratios = []
    for task in sorted(by_task):
        a, b = by_task[task].get("with"), by_task[task].get("without")

        def ms(v):
            if v is None:
                return "-"
            return f"{v['runtime_ms']:.4f}" if v.get("correct") and v.get("runtime_ms") else v.get("status", "wrong")

        ratio = "-"
        if a and b and a.get("correct") and b.get("correct") and a.get("runtime_ms") and b.get("runtime_ms"):
            r = a["runtime_ms"] / b["runtime_ms"]
            ratios.append(r)
            ratio = f"{r:.3f}"
        eager = ((a or b or {}).get("baseline_ms") or {}).get("eager")
        lines.append(f"{task[:44]:44s} {ms(a):>9s} {ms(b):>10s} {ratio:>12s} {eager if eager is None else f'{eager:.4f}':>9}")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        better = sum(r < 1 for r in ratios)
        lines.append(f"{key}: with / without geomean {geo:.3f} over {len(ratios)} tasks; faster with it on {better}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--key", default="convstats")
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", default=None)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rows", default=None, help="print the table of saved verdicts (JSON lines) and exit")
    args = ap.parse_args()
    if args.rows:
        if not Path(args.rows).is_file():
            print(f"plan_ab: no such verdicts file: {args.rows}", file=sys.stderr)
            return 2
        verdicts = [json.loads(l) for l in Path(args.rows).read_text().splitlines() if l.startswith("{")]
        print(table(verdicts, args.key))
        return 0
    if not args.tasks:
        ap.error("give tasks, or --rows")
    if not Path(args.bin).is_file():
        print(f"plan_ab: no adaexplore binary at {args.bin} (build it, or pass --bin)", file=sys.stderr)
        return 2
    out = Path(args.out or tempfile.mkdtemp(prefix="plan_ab_"))
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for task in args.tasks:
        try:
            plans = list_plans(args.bin, task, args.device)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            continue
        p = pair(plans, args.key)
        if p is None:
            print(f"{task}: no large-step plan with {args.key}; skipped", file=sys.stderr)
            continue
        stem = Path(task).stem
        try:
            for side, plan in zip(("with", "without"), p):
                generate(args.bin, task, args.device, plan, out / f"{stem}_{side}.py")
        except RuntimeError as e:
            print(f"{e}; skipped", file=sys.stderr)
            continue
        for side in ("with", "without"):
            cand = out / f"{stem}_{side}.py"
            manifest.append({"task": os.path.abspath(task) if os.path.exists(task) else task, "candidate": str(cand)})
    if not manifest:
        print("nothing to judge", file=sys.stderr)
        return 1
    (out / "manifest.jsonl").write_text("".join(json.dumps(m) + "\n" for m in manifest))
    cmd = [args.bin, "batch", str(out / "manifest.jsonl"), "--device", args.device, "--baselines", "eager",
           "--trials", str(args.trials), "--iters", str(args.iters), "--warmup", str(args.warmup)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    (out / "verdicts.jsonl").write_text(res.stdout)
    if res.returncode != 0:
        print(f"adaexplore batch exited {res.returncode}: {res.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    verdicts = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    print(table(verdicts, args.key))
    print(f"verdicts: {out / 'verdicts.jsonl'}")
    return 0 if verdicts else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The judge's GPU suite: every corpus case (honest, adversarial, faults and
the GPU-only ones) judged on a GPU through `adaexplore batch`, then checks
that need a second run (the CUDA build cache) and the timing's noise: one
honest kernel judged --repeat times, whose medians must lie within 3% of each
other and never be rejected by the judge's clock. Prints one line per case
(an ok verdict with its median, the judge's clock per call and their ratio)
and 'N passed, N failed'. Standard library only: it runs on the device machine.

    run_suite.py --bin build/adaexplore [--device cuda:0] [--jobs 4] [--repeat 5]
"""

import argparse
import collections
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
TASK = ROOT / "examples" / "tasks" / "1_BiasReLUScale.py"


def header(path):
    """What the judge must conclude on a GPU (`# expect-gpu:` where it differs from the CPU's
    `# expect:`), and the case's extra arguments."""
    text = path.read_text()
    exp = (re.search(r"^# expect-gpu: (.*)$", text, re.M) or re.search(r"^# expect: (.*)$", text, re.M)).group(1)
    fields = dict(kv.split("=", 1) for kv in exp.split())
    args = re.search(r"^# args: (.*)$", text, re.M)
    checks = re.findall(r"^# check: (\S+)$", text, re.M)
    return fields["status"].split("|"), fields.get("flag"), (args.group(1) if args else ""), checks


def listen(port, counter):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(4)
    s.settimeout(0.5)

    def loop():
        while not counter["stop"]:
            try:
                c, _ = s.accept()
                counter["n"] += 1
                c.close()
            except OSError:
                pass
        s.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def run_batch(binary, device, jobs, cases, extra, workdir, env):
    manifest = Path(workdir) / ("m%d.jsonl" % abs(hash(extra)))
    manifest.write_text("".join(json.dumps({"task": str(TASK), "candidate": str(c)}) + "\n" for c in cases))
    timing = [x for flag, value in (("--iters", "20"), ("--warmup", "3")) if flag not in extra.split()
              for x in (flag, value)]
    cmd = [binary, "batch", str(manifest), "--device", device, "--jobs", str(jobs), "--no-cache"] + timing + extra.split()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        raise SystemExit("batch failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    sys.stderr.write(p.stderr)
    return [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--out", default="")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ)
    cases = sorted(p for d in ("honest", "adversarial", "faults", "gpu") for p in (CORPUS / d).glob("*.py"))
    groups = collections.defaultdict(list)
    for c in cases:
        groups[header(c)[2]].append(c)
    counter = {"n": 0, "stop": False}
    lt = listen(47231, counter)
    target = Path("/tmp/adaexplore-redteam-target")
    target.write_text("original\n")
    results = {}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as wd:
        for extra, group in sorted(groups.items()):
            for c, v in zip(group, run_batch(args.bin, args.device, args.jobs, group, extra, wd, env)):
                results[c] = v
                # As they come, so that a run cut short still shows its cases.
                print("  [%5.0f s] %s/%s: %s %s" % (time.time() - t0, c.parent.name, c.stem, v.get("status"),
                                                  ",".join(v.get("flags", []))), flush=True)
    counter["stop"] = True
    lt.join()
    passed = failed = 0
    lines = []

    def report(ok, name, text):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        lines.append("%s %-40s %s" % ("PASS" if ok else "FAIL", name, text))

    for c in cases:
        statuses, flag, _, checks = header(c)
        v = results[c]
        ok = v.get("status") in statuses and (not flag or flag in v.get("flags", []))
        ok = bool(ok and v.get("correct") == (v.get("status") == "ok") and (v.get("status") == "ok" or v.get("error")))
        detail = "%s flags=%s" % (v.get("status"), ",".join(v.get("flags", [])))
        if v.get("status") == "ok":
            detail += " runtime=%.4fms speedup=%s" % (v.get("runtime_ms") or 0, {k: round(x, 2) for k, x in v.get("speedup", {}).items()})
            if v.get("host_ms") and v.get("runtime_ms"):
                detail += " judge_clock=%.4fms (x%.3f)" % (v["host_ms"], v["host_ms"] / v["runtime_ms"])
        if not ok:
            detail += " | expected %s %s | %s" % (statuses, flag or "", (v.get("error") or "")[:300].replace("\n", " "))
        report(ok, "%s/%s" % (c.parent.name, c.stem), detail)
    # A timed candidate's GPU times (one profiled call, device held alone): present, busy time
    # within the span, and busy time not above the timed median, which also counts the host's
    # time before the first launch and between launches (slack for noise).
    timed = [(c, v) for c, v in results.items() if v.get("status") == "ok" and v.get("runtime_ms")]
    bad = ["%s (busy %s, span %s, runtime %.4f)" % (c.stem, v.get("gpu_busy_ms"), v.get("gpu_span_ms"), v["runtime_ms"])
           for c, v in timed if not (0 < (v.get("gpu_busy_ms") or 0) <= (v.get("gpu_span_ms") or 0) + 1e-6
                                     and v["gpu_busy_ms"] <= 1.25 * v["runtime_ms"] + 0.01)]
    report(bool(timed) and not bad, "timing/gpu_busy", "%d timed, bad: %s" % (len(timed), bad or "none"))
    report(counter["n"] == 0, "network/no_connection", "connections seen: %d" % counter["n"])
    left = subprocess.run(["pgrep", "-f", "sleep 4242"], capture_output=True, text=True).stdout.split()
    report(not left, "processes/no_leftover", "left: %s" % left)
    report(target.read_text() == "original\n", "filesystem/task_not_rewritten", target.read_text().strip())
    # The CUDA build cache: judging the same CUDA candidate again must not compile again.
    cuda_ok = CORPUS / "gpu" / "cuda_inline_ok.py"
    first = results[cuda_ok].get("judge_seconds", 0)
    with tempfile.TemporaryDirectory() as wd:
        again = run_batch(args.bin, args.device, 1, [cuda_ok], "", wd, env)[0]
    report(again.get("status") == "ok" and again["judge_seconds"] < first,
           "cuda/build_cache_reused", "first %.1fs, again %.1fs" % (first, again.get("judge_seconds", 0)))
    # The timing's noise: the same honest kernel judged --repeat times, one after the other.
    honest = CORPUS / "honest" / "fused_triton.py"
    if args.repeat > 1:
        with tempfile.TemporaryDirectory() as wd:
            runs = run_batch(args.bin, args.device, 1, [honest] * args.repeat, "", wd, env)
        medians = [v.get("runtime_ms") or 0 for v in runs]
        ok = all(v.get("status") == "ok" for v in runs) and min(medians) > 0
        spread = max(medians) / min(medians) - 1 if ok else float("inf")
        clocks = ["%.3f" % (v["host_ms"] / v["runtime_ms"]) for v in runs if v.get("host_ms") and v.get("runtime_ms")]
        report(ok and spread <= 0.03, "timing/repeat_%d" % args.repeat,
               "medians %s ms (spread %.1f%%), judge's clock / median %s, statuses %s" % (
                   ["%.4f" % m for m in medians], spread * 100, clocks, [v.get("status") for v in runs]))
    summary = "%d passed, %d failed" % (passed, failed)
    text = "\n".join(lines) + "\nsuite wall %.1f s\n%s\n" % (time.time() - t0, summary)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

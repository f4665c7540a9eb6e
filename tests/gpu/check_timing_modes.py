#!/usr/bin/env python3
"""The judge's two timing modes on a GPU: the bundled example's candidate judged REPS times with
--timing host and REPS times with --timing gpu (no cache). Prints, per mode, the medians of the
candidate and baselines and their spread over the repetitions, and fails (exit 1) unless every
verdict is `ok` with no `timing_forged`, records its mode, and GPU timing measures the candidate
no slower than host timing does (it hides launches; the kernel itself is the same).

    python3 tests/gpu/check_timing_modes.py [--bin build/adaexplore] [--device cuda:0] [--reps 3]
                                            [--task T --candidate C] [--json OUT]
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def judge(binary, task, cand, device, mode):
    cmd = [binary, "eval", str(task), str(cand), "--device", device, "--json", "--no-cache", "--timing", mode]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit("eval --timing %s failed (exit %d): %s" % (mode, p.returncode, p.stderr.strip()[-300:]))
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--task", default=str(ROOT / "examples" / "tasks" / "1_BiasReLUScale.py"))
    ap.add_argument("--candidate", default=str(ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"))
    ap.add_argument("--json")
    a = ap.parse_args()
    rows, bad = {}, []
    for mode in ("host", "gpu"):
        vs = [judge(a.bin, a.task, a.candidate, a.device, mode) for _ in range(a.reps)]
        for v in vs:
            if v.get("status") != "ok" or "timing_forged" in (v.get("flags") or []):
                bad.append("%s: %s %s" % (mode, v.get("status"), (v.get("error") or "")[:200]))
            if v.get("timing_mode") != mode:
                bad.append("%s: the verdict records timing_mode %r" % (mode, v.get("timing_mode")))
        figs = {"candidate": [v.get("runtime_ms") or 0 for v in vs]}
        for b in ("eager", "compile"):
            figs[b] = [(v.get("baseline_ms") or {}).get(b) or 0 for v in vs]
        rows[mode] = {k: {"median_ms": statistics.median(x), "spread": (max(x) - min(x)) / max(statistics.median(x), 1e-9),
                          "all_ms": x} for k, x in figs.items()}
        rows[mode]["speedup_vs_eager"] = statistics.median([(v.get("speedup") or {}).get("eager") or 0 for v in vs])
        print("%-4s " % mode + "  ".join("%s %.4f ms (spread %.0f%%)" % (k, r["median_ms"], 100 * r["spread"])
                                         for k, r in rows[mode].items() if isinstance(r, dict))
              + "  speedup vs eager %.2fx" % rows[mode]["speedup_vs_eager"])
    if rows["gpu"]["candidate"]["median_ms"] > rows["host"]["candidate"]["median_ms"] * 1.05:
        bad.append("gpu timing measured the candidate slower than host timing")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    for b in bad:
        print("FAIL " + b)
    print("timing modes: %s" % ("ok" if not bad else "FAILED"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

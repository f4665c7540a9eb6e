#!/usr/bin/env python3
"""bench/python_api: what a call through the Python package costs next to the command line.

    python_api.py [--device cpu] [--repeat 5] [--bin build/adaexplore] [--out FILE]

Judges the bundled example candidate on the bundled task REPEAT times each way:
`adaexplore eval` as a subprocess (the binary) and adaexplore.evaluate() in this
process (the extension, build/python or an installed package). Both start their
own judge pool per call and share nothing: the verdict cache is off, and the
Triton and inductor build caches are warmed once before the clock starts. Prints
each way's median wall time per call and the difference, and how long `import
adaexplore` takes.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples" / "tasks" / "1_BiasReLUScale.py"
CAND = ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bin", default=str(ROOT / "build" / "adaexplore"))
    ap.add_argument("--out")
    a = ap.parse_args()
    os.environ.setdefault("ADAEXPLORE_CACHE_DIR", tempfile.mkdtemp(prefix="adaexplore-bench-api-"))
    os.environ.setdefault("ADAEXPLORE_PYTHON", sys.executable)
    flags = ["--device", a.device, "--trials", "2", "--iters", "5", "--warmup", "2", "--no-cache"]
    t = time.perf_counter()
    sys.path.insert(0, str(ROOT / "build" / "python"))
    import adaexplore
    import_s = time.perf_counter() - t
    kw = dict(device=a.device, trials=2, iters=5, warmup=2, cache=False)
    adaexplore.evaluate(TASK, CAND, **kw)  # warms the build caches for both ways
    cli, api = [], []
    for _ in range(a.repeat):
        t = time.perf_counter()
        p = subprocess.run([a.bin, "eval", str(TASK), str(CAND), "--json"] + flags, capture_output=True, text=True)
        cli.append(time.perf_counter() - t)
        assert p.returncode == 0 and json.loads(p.stdout.splitlines()[-1])["correct"], p.stderr
        t = time.perf_counter()
        v = adaexplore.evaluate(TASK, CAND, **kw)
        api.append(time.perf_counter() - t)
        assert v.correct, v.error
    res = {"device": a.device, "repeat": a.repeat, "import_s": import_s, "cli_median_s": statistics.median(cli),
           "api_median_s": statistics.median(api), "cli_s": cli, "api_s": api,
           "package": os.path.dirname(adaexplore.__file__), "date": time.strftime("%Y-%m-%d")}
    res["api_minus_cli_s"] = res["api_median_s"] - res["cli_median_s"]
    print("import adaexplore: %.3f s" % import_s)
    print("adaexplore eval (subprocess): median %.3f s per call over %d" % (res["cli_median_s"], a.repeat))
    print("adaexplore.evaluate (in process): median %.3f s per call over %d" % (res["api_median_s"], a.repeat))
    print("API minus command line: %+.3f s per call" % res["api_minus_cli_s"])
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()

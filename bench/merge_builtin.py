#!/usr/bin/env python3
"""bench/merge_builtin: one report from the rows of several bench/builtin runs.

    python3 bench/merge_builtin.py NEWEST.jsonl ... OLDEST.jsonl [--out merged.jsonl] [--tasks A.jsonl]

For runs cut short (a timeout, an interrupt) and continued, or re-runs of some tasks after a change: each
task takes its row from the first file (in the order given, so newest first) where it has a
correct kernel; a task correct in none takes its first finished row (status other than
"missing"), else its first row. The task list is the union of the files' tasks, or the tasks of
--tasks. Prints bench/builtin's table with a `from` column (the file each row came from) and its
aggregates (degenerate tasks excluded, a task without a correct kernel counted as 1.0x); --out
writes the chosen rows (each with "from") as JSONL. Rows are taken as measured: figures from
files of different runs are not re-normalised, so the merge only makes sense for runs on the
same device and software (the header lists each file's device and copy bandwidth).
"""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_builtin", HERE / "builtin.py")
builtin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builtin)


def read_rows(path):
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                raise SystemExit("merge_builtin: %s:%d: not a JSON row (%s)" % (path, n, e))
            if not isinstance(r, dict) or "task" not in r:
                raise SystemExit("merge_builtin: %s:%d: a row without a task" % (path, n))
            rows[r["task"]] = r
    return rows


def choose(task, files):
    """(row, file) for one task: first correct, else first finished, else first present."""
    present = [(rows[task], name) for name, rows in files if task in rows]
    for pick in (lambda r: r.get("correct"), lambda r: r.get("status") != "missing", lambda r: True):
        for r, name in present:
            if pick(r):
                return r, name
    return None, None


def merge(paths, tasks=None):
    files = [(str(p), read_rows(p)) for p in paths]
    if tasks is None:
        tasks = []
        for _, rows in files:
            tasks += [t for t in rows if t not in tasks]
    out = []
    for t in tasks:
        r, name = choose(t, files)
        if r is None:
            continue
        r = dict(r)
        r["from"] = Path(name).name
        out.append(r)
    out.sort(key=lambda r: (r.get("level", ""), builtin._numeric_prefix(r["task"])))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="bench_builtin.jsonl files, newest first")
    ap.add_argument("--out", default=None, help="write the chosen rows here (JSONL)")
    ap.add_argument("--tasks", default=None, help="take the task list from this JSONL file")
    args = ap.parse_args(argv)
    for p in args.files + ([args.tasks] if args.tasks else []):
        if not Path(p).is_file():
            print("merge_builtin: no such file: %s" % p, file=sys.stderr)
            return 2
    tasks = list(read_rows(args.tasks)) if args.tasks else None
    rows = merge(args.files, tasks)
    for p in args.files:
        devs = {(r["device"], round(r["copy_gbs"])) for r in read_rows(p).values() if r.get("copy_gbs") and r.get("device")}
        print("# %s: %s" % (Path(p).name, ", ".join("%s, copy %d GB/s" % d for d in sorted(devs)) or "no GPU rows"))
    print(builtin.HEADER + " from")
    for r in rows:
        print(builtin.format_row(r) + " [" + r["from"] + "]")
    agg = builtin.aggregate(rows, compile_baseline=any(r.get("speedup_compile") is not None for r in rows))
    gpus = {r.get("device") for r in rows if r.get("device")}
    meta = {"date": "merged", "gpu": ", ".join(sorted(gpus)) or "?", "cuda": bool(gpus - {"cpu"}),
            "torch": "(per file)", "triton": "(per file)", "steps": "as run", "copy_bps": None}
    builtin.print_aggregates(agg, meta)
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        print("rows: %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

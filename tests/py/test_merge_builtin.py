"""bench/merge_builtin.py: rows of several bench/builtin runs merged into one report (newest
correct row per task), on the CPU, from JSONL files written here."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "merge_builtin.py"


def row(task, correct, status="found", eager=None, comp=None, level="level1", bw=None, degenerate=False):
    return {"task": task, "level": level, "category": "elementwise", "memory_bound": level == "level1",
            "correct": correct, "status": status, "runtime_ms": 1.0 if correct else None,
            "speedup_eager": eager, "speedup_compile": comp, "degenerate": degenerate,
            "bw_fraction": bw, "achieved_gbs": 4000.0 * bw if bw else None, "copy_gbs": 4000.0,
            "device": "NVIDIA H200", "reason": "" if correct else "mismatch"}


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_newest_correct_row_wins_and_aggregates_count_the_rest(tmp_path):
    old = write(tmp_path / "old.jsonl", [
        row("1_A", True, eager=2.0, comp=1.5, bw=0.9),
        row("2_B", True, eager=4.0, comp=2.0, bw=0.5),
        row("3_C", False, status="missing"),
        row("4_D", False, status="found"),
        row("5_E", True, eager=1.0, comp=1.0, bw=0.99, degenerate=True),
    ])
    new = write(tmp_path / "new.jsonl", [
        row("1_A", False, status="missing"),           # cut short: the old correct row stays
        row("2_B", True, eager=3.0, comp=1.2, bw=0.85),  # re-run: the new row wins
        row("3_C", False, status="found"),              # finished but wrong: counted, not correct
    ])
    out = tmp_path / "merged.jsonl"
    p = run(new, old, "--out", out)
    assert p.returncode == 0, p.stderr
    rows = {r["task"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["1_A"]["from"] == "old.jsonl" and rows["1_A"]["correct"]
    assert rows["2_B"]["from"] == "new.jsonl" and rows["2_B"]["speedup_eager"] == 3.0
    assert rows["3_C"]["from"] == "new.jsonl" and rows["3_C"]["status"] == "found"
    assert rows["4_D"]["from"] == "old.jsonl"
    # 4 non-degenerate tasks, 2 correct: geomean of (2, 3, 1, 1) = 6^(1/4)
    assert "correct 2/4 = 50.0%" in p.stdout
    assert "vs eager %.3fx" % (6 ** 0.25) in p.stdout
    assert "excluded as degenerate: 5_E" in p.stdout
    assert ">= 0.80: 2/2" in p.stdout  # 0.9 and 0.85


def test_task_list_and_bad_input(tmp_path):
    a = write(tmp_path / "a.jsonl", [row("1_A", True, eager=2.0, comp=1.0, bw=0.9), row("9_Z", True, eager=5.0)])
    only = write(tmp_path / "only.jsonl", [row("1_A", False, status="missing")])
    p = run(a, "--tasks", only)
    assert p.returncode == 0, p.stderr
    assert "1_A" in p.stdout and "9_Z" not in p.stdout
    p = run(tmp_path / "absent.jsonl")
    assert p.returncode == 2 and "no such file" in p.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    p = run(bad)
    assert p.returncode != 0 and "bad.jsonl:1: not a JSON row" in p.stderr

"""`adaexplore report --html` in a real headless browser (Debian's Chromium).

A small run folder is written by hand with sqlite3 (the schema of
src/search/run_store.cpp), rendered by the real binary, and loaded in
Chromium with ?selftest=1: the page's own self-test sorts the task table,
clicks a search-tree node and checks that its candidate, verdict and prompt
show, and records any JavaScript error; the result is read back from the
dumped DOM. A screenshot of the page (and one with a node opened) is written
for a person to look at. Skipped when Chromium is not installed.
"""

import hashlib
import html
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

SCHEMA = """
PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS llm_calls (task TEXT NOT NULL, seq INTEGER NOT NULL, purpose TEXT NOT NULL,
  request_hash TEXT NOT NULL, record TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (task, seq));
CREATE TABLE IF NOT EXISTS verdicts (task TEXT NOT NULL, cand_hash TEXT NOT NULL, verdict TEXT NOT NULL,
  created REAL NOT NULL, PRIMARY KEY (task, cand_hash));
CREATE TABLE IF NOT EXISTS nodes (task TEXT NOT NULL, id INTEGER NOT NULL, node TEXT NOT NULL,
  created REAL NOT NULL, PRIMARY KEY (task, id));
CREATE TABLE IF NOT EXISTS trees (task TEXT PRIMARY KEY, tree TEXT NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (task TEXT PRIMARY KEY, status TEXT NOT NULL, summary TEXT NOT NULL,
  updated REAL NOT NULL);
"""

# Text that must be escaped: it would end the data block or inject markup.
NASTY = "s = '</script><script>window.__pwned = 1</script>' if a < b and c > d else \"&amp; <b>\"\n"

# (task, [(kind, parent, status, correct, eager, compile)], final eager, final compile)
TASKS = [
    ("b_mid", [("large", 0, "compile_error", False, 0, 0), ("large", 0, "ok", True, 1.4, 0.9),
               ("small", 2, "ok", True, 1.5, 1.0), ("small", 2, "mismatch", False, 0, 0)], 1.5, 1.0),
    ("a_fast", [("large", 0, "ok", True, 2.0, 1.2), ("small", 1, "ok", True, 3.1, 1.9),
                ("large", 0, "timeout", False, 0, 0), ("small", 2, "runtime_error", False, 0, 0)], 3.0, 1.8),
    ("c_none", [("large", 0, "mismatch", False, 0, 0), ("large", 0, "rejected", False, 0, 0)], None, None),
    ("d_slow", [("large", 0, "ok", True, 0.7, 0.4), ("small", 1, "no_candidate", False, 0, 0)], 0.7, 0.4),
]


def source(task, i):
    return "# %s candidate %d\nimport triton\n%sclass ModelNew: pass\n" % (task, i, NASTY)


def make_run(run):
    run.mkdir(parents=True)
    db = sqlite3.connect(str(run / "run.sqlite"))
    db.executescript(SCHEMA)
    config = {"proposer": "compat:fake@http://127.0.0.1:1/v1", "steps": 4, "search": "mcts", "seed": 1,
              "device": "cuda:0", "tolerance": "strict", "backend": "triton", "memory": "", "params": {},
              "tasks": [{"name": t[0], "path": "/tasks/%s.py" % t[0], "hash": t[0]} for t in TASKS]}
    db.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(config),))
    for name, steps, fe, fc in TASKS:
        nodes = [{"id": 0, "parent": -1, "kind": "root", "source": "class Model: pass\n", "hash": "",
                  "outcome": {"status": "", "correct": False, "speedup": 0, "runtime_ms": 0, "error": "", "flags": []},
                  "visits": len(steps), "reward": 0, "note": ""}]
        seq = 0
        best, best_sp = -1, 0
        for i, (kind, parent, status, correct, eager, compile_) in enumerate(steps, start=1):
            src = source(name, i)
            h = hashlib.sha256(src.encode()).hexdigest()
            err = "" if correct else "%s: expected <tensor> & got \"x\"" % status
            nodes.append({"id": i, "parent": parent, "kind": kind, "source": src if status != "no_candidate" else "",
                          "hash": h if status != "no_candidate" else "",
                          "outcome": {"status": status, "correct": correct, "speedup": eager,
                                      "runtime_ms": 1.0 / eager if correct else 0, "error": err, "flags": []},
                          "visits": 1, "reward": 0.5, "note": "guidance:\nfuse the loads" if kind == "small" else ""})
            if correct and eager > best_sp:
                best, best_sp = i, eager
            if status != "no_candidate":
                verdict = {"status": status, "correct": correct, "flags": [], "error": err,
                           "runtime_ms": 1.0 / eager if correct else None,
                           "baseline_ms": {"eager": 1.0, "compile": 0.6},
                           "speedup": {"eager": eager, "compile": compile_} if correct else {},
                           "device": "NVIDIA H200", "judge_seconds": 2.0, "task": {"degenerate": []}}
                if correct:
                    verdict["profile"] = {"busy_ms": 0.8, "kernels": [
                        {"name": "fused_%s_kernel" % name, "ms": 0.6, "share": 0.75, "launches": 1},
                        {"name": "void at::native::copy_kernel", "ms": 0.2, "share": 0.25, "launches": 2}],
                        "roofline": {"flops": 0, "bytes": 2e9, "gbps": 2500, "tflops": 0, "bandwidth_fraction": 0.6,
                                     "flops_fraction": 0, "bound": "memory"}}
                db.execute("INSERT INTO verdicts VALUES (?, ?, ?, 0)", (name, h, json.dumps(verdict)))
            purposes = ["propose"] if kind == "large" else ["revise", "tune"]
            for p in purposes:
                rec = {"v": 1, "provider": "compat", "model": "fake", "task": name, "purpose": p,
                       "request": {"system": "You write kernels.",
                                   "messages": [{"role": "user", "content": "PROMPT %s step %d %s <task> & \"x\"" % (name, i, p)}]},
                       "reply": {"text": "```python\n%s```" % src}, "usage": {"input_tokens": 1000, "output_tokens": 200},
                       "cost_usd": 0.01, "latency_s": 1.5, "ok": True, "error": ""}
                db.execute("INSERT INTO llm_calls VALUES (?, ?, ?, 'h', ?, 0)", (name, seq, p, json.dumps(rec)))
                seq += 1
        db.execute("INSERT INTO trees VALUES (?, ?, 0)", (name, json.dumps({"nodes": nodes})))
        summary = {"task": name, "status": "found" if fe else "none", "steps": len(steps), "best_node": best if fe else -1,
                   "llm_calls": seq, "judged": len(steps), "wall_s": 30.0}
        if fe:
            summary.update({"speedup": {"eager": fe, "compile": fc}, "baseline_ms": {"eager": 1.0, "compile": 0.6},
                            "runtime_ms": 1.0 / fe, "flags": [], "device": "NVIDIA H200"})
            (run / name).mkdir()
            (run / name / "best.py").write_text("# adaexplore: best kernel for %s\n%s" % (name, source(name, best)))
        db.execute("INSERT INTO tasks VALUES (?, ?, ?, 0)", (name, summary["status"], json.dumps(summary)))
    db.commit()
    db.close()


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(browser, profile, *args, timeout=180):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--user-data-dir=%s" % profile, "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def rendered(binary, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    run = tmp / "run"
    make_run(run)
    page = run / "report.html"
    p = subprocess.run([str(binary), "report", str(run), "--html", str(page), "--json", str(tmp / "r.json"),
                        "--csv", str(tmp / "r.csv")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return {"tmp": tmp, "run": run, "page": page, "stdout": p.stdout, "json": json.loads((tmp / "r.json").read_text())}


def test_cli_summary_and_exports(rendered):
    out = rendered["stdout"]
    assert "a_fast" in out and "3.000x" in out and "correct 3/4" in out
    j = rendered["json"]
    assert [t["task"] for t in j["tasks"]] == ["b_mid", "a_fast", "c_none", "d_slow"]
    assert j["metrics"]["all"]["eager"]["fast_p"]["1"] == pytest.approx(0.5)
    assert j["metrics"]["all"]["eager"]["user_score"] == pytest.approx((1.5 * 3.0) ** 0.25)
    csv = (rendered["tmp"] / "r.csv").read_text().splitlines()
    assert csv[0] == "run,scope,name,baseline,metric,value"
    assert "run,task,a_fast,eager,speedup,3" in csv


def test_unreadable_run_is_a_one_line_error(binary, tmp_path):
    p = subprocess.run([str(binary), "report", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "run.sqlite" in p.stderr


def test_page_works_in_headless_chromium(rendered):
    browser = chromium()
    if not browser:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    page, tmp = rendered["page"], rendered["tmp"]
    url = page.resolve().as_uri()
    p = browse(browser, tmp / "profile1", "--virtual-time-budget=5000", "--dump-dom", url + "?selftest=1")
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    m = re.search(r'<pre id="selftest-result"[^>]*>(.*?)</pre>', dom, re.S)
    assert m, "the page's self-test did not run (JS error before it?): %s" % p.stderr[-2000:]
    result = json.loads(html.unescape(m.group(1)))
    print("self-test:", json.dumps(result, indent=1))
    assert result["errors"] == [], result
    for name, ok in result["checks"].items():
        assert ok is True, (name, result)
    assert result["pass"] is True
    assert result.get("profiled") and result["checks"]["panel_shows_profile"], "no profiled node was shown"
    # Sorted by speedup vs eager, both ways: tasks without a kernel last.
    assert result["order_asc"] == ["d_slow", "b_mid", "a_fast", "c_none"], result
    assert result["order_desc"] == ["a_fast", "b_mid", "d_slow", "c_none"], result
    # No JavaScript error in the console, and nothing from the sources ran.
    assert "Uncaught" not in p.stderr, p.stderr[-2000:]
    assert dom.count("<script") == 3, "a source's </script> broke out of the data block"
    assert "__pwned = 1</script><script>" not in dom.replace("&lt;", "<")[: dom.find("report-data")]

    shots = Path(os.environ.get("ADAEXPLORE_ARTIFACTS", Path(tempfile.gettempdir()) / "adaexplore-artifacts"))
    shots.mkdir(parents=True, exist_ok=True)
    for name, query, size in (("report.png", "", "1400,2200"), ("report-node.png", "?open=1:2", "1400,1000")):
        path = shots / name
        if path.exists():
            path.unlink()
        p = browse(browser, tmp / ("profile-" + name), "--virtual-time-budget=5000", "--hide-scrollbars",
                   "--window-size=%s" % size, "--screenshot=%s" % path, url + query)
        assert p.returncode == 0 and path.exists() and path.stat().st_size > 10000, p.stderr[-2000:]
        print("screenshot:", path)


def test_ab_comparison(binary, rendered):
    run = rendered["run"]
    out = rendered["tmp"] / "ab.json"
    p = subprocess.run([str(binary), "report", str(run), "--vs", str(run), "--json", str(out),
                        "--html", str(rendered["tmp"] / "ab.html")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "4 tasks in both" in p.stdout
    j = json.loads(out.read_text())
    assert j["comparison"]["common"] == 4
    ratios = {t["task"]: t["ratio_b_over_a"]["eager"] for t in j["comparison"]["tasks"]}
    assert ratios == {"b_mid": 1.0, "a_fast": 1.0, "c_none": None, "d_slow": 1.0}
    assert "A/B comparison" in (rendered["tmp"] / "ab.html").read_text()

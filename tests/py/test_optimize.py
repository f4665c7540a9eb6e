"""`adaexplore optimize` end to end on the CPU: a real HTTP client against a
scripted OpenAI-compatible server, the real judge, a recording replayed, and
a run killed mid-way and resumed."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import EXAMPLE_TASK, ROOT
from fake_llm_server import Script, serve

JUDGE = ["--device", "cpu", "--trials", "2", "--iters", "2", "--warmup", "1"]


def tree_of(run_dir):
    db = sqlite3.connect(str(run_dir / "run.sqlite"))
    row = db.execute("SELECT tree FROM trees").fetchone()
    db.close()
    return json.loads(row[0]) if row else None


def shape(tree):
    """What must agree between runs: structure, sources and verdict kinds."""
    return [(n["id"], n["parent"], n["kind"], n["hash"], n["outcome"]["status"], n["outcome"]["correct"])
            for n in tree["nodes"]]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, binary, worker_python):
    """One live run against the scripted server, recorded."""
    tmp = tmp_path_factory.mktemp("optimize")
    script = Script()
    server = serve(script)
    port = server.server_address[1]
    env = dict(os.environ, ADAEXPLORE_PYTHON=worker_python, ADAEXPLORE_CACHE_DIR=str(tmp / "cache"))
    rec = tmp / "calls.jsonl"
    run = tmp / "live"
    p = subprocess.run([str(binary), "optimize", str(EXAMPLE_TASK), "--proposer", "compat:fake@http://127.0.0.1:%d/v1" % port,
                        "--steps", "8", "--seed", "3", "--out", str(run), "--record", str(rec)] + JUDGE,
                       capture_output=True, text=True, env=env, timeout=1200)
    server.shutdown()
    return {"tmp": tmp, "env": env, "run": run, "rec": rec, "proc": p, "script": script}


def test_live_run_finds_the_correct_kernel(recorded):
    p = recorded["proc"]
    assert p.returncode == 0, p.stderr[-3000:]
    run = recorded["run"]
    best = (run / "best.py").read_text()
    assert "class ModelNew" in best and "SCALE_FIX = 1.0" in best
    assert best.startswith("# adaexplore: best kernel for 1_BiasReLUScale")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["tasks"][0]["status"] == "found"
    statuses = [n["outcome"]["status"] for n in tree_of(run)["nodes"][1:]]
    assert "compile_error" in statuses, statuses
    assert "mismatch" in statuses, statuses
    assert "ok" in statuses, statuses
    assert len(statuses) == 8
    # The live display said what each step did.
    assert "step 8/8" in p.stderr


def test_failed_edits_are_fed_back(recorded):
    tree = tree_of(recorded["run"])
    script = recorded["script"]
    retries = [r for r in script.requests if "could not be applied" in r]
    if script.counts["tune"] == 0:
        pytest.skip("this seed took no small step")
    assert retries, "a failed edit was not fed back to the tuner"
    assert "this line is not in the file" in retries[0]
    notes = [n["note"] for n in tree["nodes"] if n["outcome"]["status"] == "no_candidate"]
    for note in notes:
        assert "no edit applied" in note


def test_every_call_is_in_the_store_and_the_recording(recorded):
    db = sqlite3.connect(str(recorded["run"] / "run.sqlite"))
    purposes = [r[0] for r in db.execute("SELECT purpose FROM llm_calls ORDER BY seq")]
    db.close()
    lines = recorded["rec"].read_text().splitlines()
    assert len(lines) == len(purposes) == len(recorded["script"].requests)
    assert purposes[0] == "propose"
    assert "OPENAI_API_KEY" not in recorded["rec"].read_text()


def test_replay_reproduces_the_run_without_network(recorded, binary):
    run2 = recorded["tmp"] / "replayed"
    p = subprocess.run([str(binary), "optimize", str(EXAMPLE_TASK), "--proposer", "replay:%s" % recorded["rec"],
                        "--steps", "8", "--seed", "3", "--out", str(run2)] + JUDGE,
                       capture_output=True, text=True, env=recorded["env"], timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    assert shape(tree_of(run2)) == shape(tree_of(recorded["run"]))


def test_killed_run_resumes_to_the_same_tree(recorded, binary):
    """The live run again, against a fresh (slower) scripted server and with
    the judge's verdicts from the first run's cache, so that it would make
    exactly the same tree; killed mid-way, then resumed."""
    tmp = recorded["tmp"]
    cache = tmp / "cache-killed"
    shutil.copytree(tmp / "cache", cache)
    env = dict(recorded["env"], ADAEXPLORE_CACHE_DIR=str(cache))
    server = serve(Script(delay=0.4))
    run3 = tmp / "killed"
    args = [str(binary), "optimize", str(EXAMPLE_TASK), "--proposer",
            "compat:fake@http://127.0.0.1:%d/v1" % server.server_address[1],
            "--steps", "8", "--seed", "3", "--out", str(run3)] + JUDGE
    try:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                t = tree_of(run3) if (run3 / "run.sqlite").exists() else None
            except sqlite3.Error:
                t = None
            if (t and len(t["nodes"]) >= 4) or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert len(tree_of(run3)["nodes"]) < 9
        # Without --resume the folder is refused, with a one-line reason.
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 2 and "--resume" in p.stderr
        p = subprocess.run(args + ["--resume"], capture_output=True, text=True, env=env, timeout=1200)
    finally:
        server.shutdown()
    assert p.returncode == 0, p.stderr[-3000:]
    assert shape(tree_of(run3)) == shape(tree_of(recorded["run"]))
    assert "from the store" in p.stdout


def test_bad_proposer_is_a_one_line_error(run_cli, tmp_path):
    rc, out, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", "openai:gpt-x", "--out", tmp_path / "r",
                           "--device", "cpu", env_extra={"OPENAI_API_KEY": ""})
    assert rc == 2
    assert "OPENAI_API_KEY" in err and len(err.strip().splitlines()) == 1


def test_resumed_bench_does_not_redo_finished_tasks(binary, worker_python, tmp_path):
    """A bench resumed after it finished a task leaves that task alone: no
    judging, no final re-timing, the same result in the summary."""
    env = dict(os.environ, ADAEXPLORE_PYTHON=worker_python, ADAEXPLORE_CACHE_DIR=str(tmp_path / "cache"))
    out = tmp_path / "run"
    args = [str(binary), "bench", str(EXAMPLE_TASK), "--proposer", "builtin", "--steps", "2",
            "--out", str(out)] + JUDGE
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr
    first = json.loads((out / "summary.json").read_text())["tasks"]
    assert first[0]["status"] == "found" and first[0]["judged"] >= 1
    db = sqlite3.connect(str(out / "run.sqlite"))
    verdicts = db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    db.close()
    p = subprocess.run(args + ["--resume"], capture_output=True, text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr
    assert "not run again" in p.stderr
    again = json.loads((out / "summary.json").read_text())["tasks"]
    for key in ("status", "best_node", "speedup", "runtime_ms", "steps"):
        assert again[0][key] == first[0][key], key
    db = sqlite3.connect(str(out / "run.sqlite"))
    assert db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == verdicts
    db.close()
    # A larger budget continues the task instead.
    p = subprocess.run([a if a != "2" else "3" for a in args] + ["--resume"], capture_output=True, text=True,
                       env=env, timeout=1200)
    assert p.returncode == 0, p.stderr
    assert "not run again" not in p.stderr


def test_interrupted_bench_saves_the_run_and_resumes(binary, worker_python, tmp_path):
    """SIGINT stops a bench gracefully: the step being judged finishes, tasks not
    started are not started, the store is closed (no write-ahead log left) and
    summary.json says what stopped; exit 130. --resume then finishes the run."""
    env = dict(os.environ, ADAEXPLORE_PYTHON=worker_python, ADAEXPLORE_CACHE_DIR=str(tmp_path / "cache"))
    second = tmp_path / "tasks" / "2_AffineSigmoid.py"
    second.parent.mkdir()
    shutil.copy(ROOT / "tests" / "corpus" / "builtin" / "affine_sigmoid.py", second)
    shutil.copy(EXAMPLE_TASK, second.parent / EXAMPLE_TASK.name)
    out = tmp_path / "run"
    args = [str(binary), "bench", str(second.parent), "--proposer", "builtin", "--jobs", "1",
            "--out", str(out)] + JUDGE
    proc = subprocess.Popen(args + ["--steps", "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    err = []
    try:
        for line in proc.stderr:
            err.append(line)
            if "step 2/40" in line:
                break
        assert proc.poll() is None, "".join(err)[-3000:]
        proc.send_signal(signal.SIGINT)
        rest_out, rest_err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = "".join(err) + rest_err
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "--resume" in err.strip().splitlines()[-1]
    tasks = {t["task"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert tasks["1_BiasReLUScale"]["status"] == "stopped: interrupted"
    assert tasks["2_AffineSigmoid"]["status"] == "stopped: interrupted"
    assert not (out / "run.sqlite-wal").exists() or (out / "run.sqlite-wal").stat().st_size == 0
    db = sqlite3.connect(str(out / "run.sqlite"))
    tree = json.loads(db.execute("SELECT tree FROM trees WHERE task = '1_BiasReLUScale'").fetchone()[0])
    assert db.execute("SELECT COUNT(*) FROM trees WHERE task = '2_AffineSigmoid'").fetchone()[0] == 0
    db.close()
    assert 3 <= len(tree["nodes"]) < 41  # the root and at least two judged steps
    p = subprocess.run(args + ["--steps", "3", "--resume"], capture_output=True, text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    tasks = {t["task"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert tasks["1_BiasReLUScale"]["status"] == "found" and tasks["2_AffineSigmoid"]["status"] == "found"

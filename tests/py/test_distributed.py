"""The distributed judge end to end on the CPU: a real redis-server started on a
free port, real `adaexplore worker` processes, and runs that judge through
them with --judge (docs/distributed.md)."""

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CORPUS, EXAMPLE_TASK, ROOT

REDIS = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/setup.sh installs it)")

JUDGE = ["--device", "cpu", "--trials", "2", "--iters", "2", "--warmup", "1"]
CANDIDATE = ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"
PASSWORD = "pw-7f3a"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server of the test's own, with an append-only file."""

    def __init__(self, tmp, password=PASSWORD):
        self.port = free_port()
        self.dir = tmp / "redis"
        self.dir.mkdir(exist_ok=True)
        self.password = password
        self.proc = None
        self.start()

    def start(self):
        args = [REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", "",
                "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--protected-mode", "no"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def url(self, password=None):
        pw = self.password if password is None else password
        return "redis://%s127.0.0.1:%d" % ((":%s@" % pw) if pw else "", self.port)

    def cli(self, *args):
        env = dict(os.environ, REDISCLI_AUTH=self.password or "")
        p = subprocess.run(["redis-cli", "-p", str(self.port), "--no-auth-warning", *map(str, args)],
                           capture_output=True, text=True, env=env, timeout=30)
        return p.stdout


@pytest.fixture()
def redis(tmp_path):
    r = Redis(tmp_path)
    yield r
    r.stop(signal.SIGKILL)


@pytest.fixture()
def env(worker_python, tmp_path):
    e = dict(os.environ, ADAEXPLORE_PYTHON=worker_python, ADAEXPLORE_CACHE_DIR=str(tmp_path / "client-cache"))
    e.pop("ADAEXPLORE_JUDGE", None)
    return e


class Workers:
    """`adaexplore worker` processes, each with a cache of its own."""

    def __init__(self, binary, env, tmp, redis):
        self.binary, self.env, self.tmp, self.redis = binary, env, tmp, redis
        self.procs = {}

    def start(self, name, lease=2, jobs=1):
        log = open(self.tmp / ("%s.log" % name), "w")
        e = dict(self.env, ADAEXPLORE_CACHE_DIR=str(self.tmp / ("cache-" + name)))
        p = subprocess.Popen([str(self.binary), "worker", "--broker", self.redis.url(), "--device", "cpu",
                              "--name", name, "--jobs", str(jobs), "--lease", str(lease)],
                             stdout=log, stderr=subprocess.STDOUT, env=e, start_new_session=True)
        self.procs[name] = p
        self.wait_log(name, "serving", 120)
        return p

    def log(self, name):
        return (self.tmp / ("%s.log" % name)).read_text()

    def wait_log(self, name, text, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.log(name):
                return
            if self.procs[name].poll() is not None:
                raise AssertionError("worker %s exited: %s" % (name, self.log(name)[-2000:]))
            time.sleep(0.2)
        raise AssertionError("worker %s never logged %r: %s" % (name, text, self.log(name)[-2000:]))

    def kill9(self, name):
        # The whole session: the worker and its sandboxed judge processes.
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(timeout=30)

    def stop_all(self):
        for name, p in self.procs.items():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=30)


@pytest.fixture()
def workers(binary, env, tmp_path, redis):
    w = Workers(binary, env, tmp_path, redis)
    yield w
    w.stop_all()


def slow_candidate(tmp_path, seconds, name="slow.py"):
    """The bundled honest candidate, made slow to build (it sleeps on import)."""
    src = CANDIDATE.read_text()
    path = tmp_path / name
    path.write_text("import time\ntime.sleep(%d)\n" % seconds + src)
    return path


def manifest(tmp_path, candidates):
    m = tmp_path / "manifest.jsonl"
    m.write_text("".join(json.dumps({"task": str(EXAMPLE_TASK), "candidate": str(c)}) + "\n" for c in candidates))
    return m


def verdicts(stdout):
    return [json.loads(l) for l in stdout.splitlines() if l.strip().startswith("{")]


def node_statuses(run_dir, task):
    db = sqlite3.connect(str(run_dir / "run.sqlite"))
    tree = json.loads(db.execute("SELECT tree FROM trees WHERE task = ?", (task,)).fetchone()[0])
    db.close()
    return [n.get("outcome", {}).get("status") for n in tree["nodes"]]


def test_bench_through_two_workers_gives_the_local_statuses(binary, env, tmp_path, redis, workers):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(EXAMPLE_TASK, tasks / EXAMPLE_TASK.name)
    shutil.copy(CORPUS / "builtin" / "affine_sigmoid.py", tasks / "2_AffineSigmoid.py")
    common = [str(binary), "bench", str(tasks), "--proposer", "builtin", "--steps", "2", "--seed", "7",
              "--judge-seed", "11"] + JUDGE
    local = subprocess.run(common + ["--out", str(tmp_path / "local")], capture_output=True, text=True, env=env,
                           timeout=1200)
    assert local.returncode == 0, local.stderr[-3000:]
    workers.start("w1")
    workers.start("w2")
    remote = subprocess.run(common + ["--out", str(tmp_path / "remote"), "--judge", redis.url()],
                            capture_output=True, text=True, env=dict(env, ADAEXPLORE_CACHE_DIR=str(tmp_path / "c2")),
                            timeout=1200)
    assert remote.returncode == 0, remote.stderr[-3000:]
    a = {t["task"]: t for t in json.loads((tmp_path / "local" / "summary.json").read_text())["tasks"]}
    b = {t["task"]: t for t in json.loads((tmp_path / "remote" / "summary.json").read_text())["tasks"]}
    assert set(a) == set(b) == {"1_BiasReLUScale", "2_AffineSigmoid"}
    for task in a:
        assert a[task]["status"] == b[task]["status"] == "found", (a[task], b[task])
        assert node_statuses(tmp_path / "local", task) == node_statuses(tmp_path / "remote", task)
    # Both workers judged, and the run records who did, never the password.
    judged_by = set()
    db = sqlite3.connect(str(tmp_path / "remote" / "run.sqlite"))
    for (v,) in db.execute("SELECT verdict FROM verdicts"):
        judged_by.add(json.loads(v).get("worker"))
    config = db.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0]
    db.close()
    assert judged_by <= {"w1", "w2"} and judged_by, judged_by
    assert PASSWORD not in config and "***" in config
    assert PASSWORD not in remote.stderr + remote.stdout


def test_killed_worker_job_completes_on_the_other_with_one_verdict(binary, env, tmp_path, redis, workers):
    workers.start("doomed")
    cand = slow_candidate(tmp_path, 6)
    batch = subprocess.Popen([str(binary), "batch", str(manifest(tmp_path, [cand])), "--judge", redis.url()] + JUDGE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        workers.wait_log("doomed", ": eval ", 120)
        workers.kill9("doomed")
        workers.start("rescuer", lease=2)
        out, err = batch.communicate(timeout=600)
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 0, err[-3000:]
    vs = verdicts(out)
    assert len(vs) == 1, out
    assert vs[0]["status"] == "ok" and vs[0]["worker"] == "rescuer", vs[0]
    assert "claimed job entry" in workers.log("rescuer")
    # One answer was published for the job; nothing is left in the queue.
    assert redis.cli("XLEN", "adaexplore:jobs:cpu").strip() == "0"


def test_job_that_kills_two_workers_is_crashed_and_does_not_block(binary, env, tmp_path, redis, workers):
    workers.start("a")
    cand = slow_candidate(tmp_path, 300, "never_done.py")
    batch = subprocess.Popen([str(binary), "batch", str(manifest(tmp_path, [cand])), "--judge", redis.url()] + JUDGE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        workers.wait_log("a", ": eval ", 120)
        workers.kill9("a")
        workers.start("b", lease=2)
        workers.wait_log("b", "claimed job entry", 60)
        workers.wait_log("b", ": eval ", 60)
        workers.kill9("b")
        workers.start("c", lease=2)
        out, err = batch.communicate(timeout=600)
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 0, err[-3000:]
    vs = verdicts(out)
    assert len(vs) == 1, out
    assert vs[0]["status"] == "crashed" and "judge_workers_lost" in vs[0]["flags"], vs[0]
    assert "died" in vs[0]["error"] and vs[0]["worker"] == "c"
    assert "(delivery 3)" in workers.log("c")
    # The queue goes on: the next job is judged.
    p = subprocess.run([str(binary), "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--json", "--judge", redis.url()]
                       + JUDGE, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["status"] == "ok"


def test_broker_restart_mid_run_completes(binary, env, tmp_path, redis, workers):
    workers.start("w")
    cands = [slow_candidate(tmp_path, 2, "s%d.py" % i) for i in range(3)]
    batch = subprocess.Popen([str(binary), "batch", str(manifest(tmp_path, cands)), "--judge", redis.url()] + JUDGE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        workers.wait_log("w", ": eval ", 120)
        redis.stop(signal.SIGTERM)  # the append-only file keeps the streams
        time.sleep(2)
        redis.start()
        out, err = batch.communicate(timeout=600)
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 0, err[-3000:]
    vs = verdicts(out)
    assert [v["status"] for v in vs] == ["ok"] * 3, vs
    assert "reconnecting" in err or "reconnecting" in workers.log("w")


def test_unreachable_broker_stops_the_run_cleanly_and_resume_continues(binary, env, tmp_path, redis, workers):
    workers.start("w")
    out_dir = tmp_path / "run"
    args = [str(binary), "optimize", str(EXAMPLE_TASK), "--proposer", "builtin", "--out", str(out_dir),
            "--judge", redis.url(), "--broker-deadline", "4"] + JUDGE
    proc = subprocess.Popen(args + ["--steps", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    err = []
    try:
        for line in proc.stderr:
            err.append(line)
            if "step 1/4" in line:
                break
        redis.stop(signal.SIGKILL)
        rest_out, rest_err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = "".join(err) + rest_err
    assert proc.returncode == 3, err[-3000:]
    reasons = [l for l in err.splitlines() if l.startswith("adaexplore: ")]
    assert len(reasons) == 1, err[-3000:]
    assert "unreachable" in reasons[0] and "--resume" in reasons[0], reasons
    assert PASSWORD not in err
    redis.start()
    p = subprocess.run(args + ["--steps", "2", "--resume"], capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads((out_dir / "summary.json").read_text())["tasks"][0]["status"] == "found"


def test_malformed_jobs_get_error_results_and_the_worker_survives(binary, env, tmp_path, redis, workers):
    w = workers.start("w")
    redis.cli("XADD", "adaexplore:jobs:cpu", "*", "id", "job1", "reply_to", "adaexplore:results:t1", "job", "{garbage")
    big = json.dumps({"v": 1, "id": "job2", "kind": "eval", "task": {"name": "x", "source": "y" * (17 << 20)}})
    big_file = tmp_path / "big.json"
    big_file.write_text(big)
    subprocess.run(["redis-cli", "-p", str(redis.port), "--no-auth-warning", "-x", "XADD", "adaexplore:jobs:cpu", "*",
                    "id", "job2", "reply_to", "adaexplore:results:t1", "job"], stdin=open(big_file),
                   env=dict(os.environ, REDISCLI_AUTH=PASSWORD), capture_output=True, timeout=60)
    # A reply stream outside the broker's namespace is never written.
    redis.cli("XADD", "adaexplore:jobs:cpu", "*", "id", "job3", "reply_to", "victim", "job", "{}")
    deadline = time.time() + 60
    results = ""
    while time.time() < deadline:
        results = redis.cli("XRANGE", "adaexplore:results:t1", "-", "+")
        if results.count('"job"') >= 2:
            break
        time.sleep(0.3)
    assert '"job":"job1"' in results and '"job":"job2"' in results, results
    assert results.count("malformed job") == 2 and "over the limit" in results
    assert redis.cli("EXISTS", "victim").strip() == "0"
    assert w.poll() is None
    # ...and still judges.
    p = subprocess.run([str(binary), "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--json", "--judge", redis.url()]
                       + JUDGE, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["status"] == "ok"


def test_judge_status_shows_workers_and_queues(binary, env, tmp_path, redis, workers):
    workers.start("w1", jobs=2)
    p = subprocess.run([str(binary), "judge-status", "--broker", redis.url(), "--json"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout)
    assert [w["name"] for w in st["workers"]] == ["w1"]
    w = st["workers"][0]
    assert w["model"] == "cpu" and w["devices"] == "cpu" and w["slots"] == "2" and w["heartbeat_age_s"] < 10
    assert {q["model"] for q in st["queues"]} >= {"cpu", "any"}
    assert PASSWORD not in p.stdout
    text = subprocess.run([str(binary), "judge-status", "--broker", redis.url()], capture_output=True, text=True,
                          env=env, timeout=60).stdout
    assert "w1" in text and "queues:" in text and "throughput:" in text


@pytest.mark.parametrize("command", ["eval", "worker", "judge-status"])
def test_wrong_password_is_exit_3_with_one_line(binary, env, redis, command):
    url = redis.url(password="not-the-password")
    args = {"eval": ["eval", str(EXAMPLE_TASK), str(CANDIDATE), "--judge", url] + JUDGE,
            "worker": ["worker", "--broker", url, "--device", "cpu"],
            "judge-status": ["judge-status", "--broker", url]}[command]
    p = subprocess.run([str(binary), *args], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 3, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "127.0.0.1:%d" % redis.port in lines[0] and "refused the authentication" in lines[0]
    assert "not-the-password" not in p.stderr and "Traceback" not in p.stderr


def test_unreachable_broker_at_start_is_exit_3(binary, env):
    p = subprocess.run([str(binary), "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--judge",
                        "redis://:secret@127.0.0.1:%d" % free_port()] + JUDGE,
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 3
    assert "unreachable" in p.stderr and "secret" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_judge_from_the_environment_and_bad_urls(binary, env, redis, workers):
    p = subprocess.run([str(binary), "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--judge", "http://x"] + JUDGE,
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and "bad broker URL" in p.stderr
    workers.start("w")
    p = subprocess.run([str(binary), "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--json"] + JUDGE,
                       capture_output=True, text=True, env=dict(env, ADAEXPLORE_JUDGE=redis.url()), timeout=600)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["worker"] == "w"


def test_verdict_cache_is_shared_across_hosts(binary, env, redis, workers):
    """A verdict judged by one worker serves another with an empty cache of its own."""
    args = [str(binary), "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--json", "--judge", redis.url()] + JUDGE
    workers.start("first")
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    v = json.loads(p.stdout.strip().splitlines()[-1])
    assert v["status"] == "ok" and not v["cached"] and v["worker"] == "first"
    workers.kill9("first")
    workers.start("second")
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    v = json.loads(p.stdout.strip().splitlines()[-1])
    assert v["status"] == "ok" and v["cached"] and v["worker"] == "second", v

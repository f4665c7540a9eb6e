"""`optimize --warm-start builtin` and provider rejections end to end on the
CPU: the real HTTP client against the scripted OpenAI-compatible server
(fake_llm_server.py), the real judge and the builtin compiler."""

import json
import sqlite3

import pytest

from conftest import EXAMPLE_TASK, ROOT
from fake_llm_server import Script, serve

JUDGE = ["--device", "cpu", "--trials", "2", "--iters", "2", "--warmup", "1"]


def tree_of(run_dir):
    db = sqlite3.connect(str(run_dir / "run.sqlite"))
    row = db.execute("SELECT tree FROM trees").fetchone()
    config = json.loads(db.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])
    db.close()
    return json.loads(row[0]), config


@pytest.fixture()
def server():
    servers = []

    def start(script):
        s = serve(script)
        servers.append(s)
        return "compat:fake@http://127.0.0.1:%d/v1" % s.server_address[1]

    yield start
    for s in servers:
        s.shutdown()


def test_warm_start_keeps_the_builtin_kernel_when_the_llm_only_fails(run_cli, server, tmp_path):
    script = Script(mode="failing")
    out = tmp_path / "run"
    rc, stdout, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", server(script), "--warm-start", "builtin",
                              "--steps", "4", "--seed", "1", "--out", out, *JUDGE)
    assert rc == 0, err[-3000:]
    best = (out / "best.py").read_text()
    assert "# adaexplore-plan: " in best, "best.py is not the builtin compiler's kernel"
    task = json.loads((out / "summary.json").read_text())["tasks"][0]
    assert task["status"] == "found"
    assert task["warm_start_steps"] == 1  # a third of --steps 4
    assert task["steps"] == 4
    assert task["best_origin"] == "builtin" and task["best_refines_warm_start"] is False
    tree, config = tree_of(out)
    assert config["warm_start"] == "builtin" and config["warm_start_steps"] == 1
    nodes = tree["nodes"]
    assert nodes[1].get("warm_start") is True and nodes[1]["parent"] == 0 and nodes[1]["kind"] == "large"
    assert all(not n.get("warm_start") for n in nodes[2:])
    assert all(not n["outcome"]["correct"] for n in nodes[2:]), "the LLM made a correct kernel"
    assert script.requests, "the LLM took no step"
    assert "from builtin" in stdout and "(1 warm-start)" in stdout
    rc, report, err = run_cli("report", out, "--html", tmp_path / "report.html")
    assert rc == 0, err
    assert "1 warm-start step; best kernel from builtin" in report
    html = (tmp_path / "report.html").read_text()
    assert "node 1 (large step, warm start)" in html  # the tree's tooltip
    assert "node 2 (large step)" in html or "node 2 (small step)" in html


def test_a_faster_llm_kernel_wins_over_the_warm_start(run_cli, server, tmp_path):
    # On the CPU Triton kernels run in Triton's interpreter, whose cost grows
    # with the number of programs: the builtin's kernel launches 256 blocks of
    # 1024, the LLM's one block of all 262144 elements, far faster.
    script = Script(mode="better")
    out = tmp_path / "run"
    rc, stdout, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", server(script), "--warm-start", "builtin",
                              "--warm-start-steps", "1", "--search", "bon", "--steps", "3", "--seed", "1",
                              "--out", out, *JUDGE)
    assert rc == 0, err[-3000:]
    task = json.loads((out / "summary.json").read_text())["tasks"][0]
    assert task["warm_start_steps"] == 1
    assert task["best_origin"] == "llm", task
    assert task["best_node"] >= 2
    best = (out / "best.py").read_text()
    assert "# adaexplore-plan: " not in best and "BLOCK = 262144" in best
    assert "from llm" in stdout
    rc, report, err = run_cli("report", out, "--json", "-", "--quiet")
    assert rc == 0, err
    row = json.loads(report)["tasks"][0]
    assert row["best_origin"] == "llm" and row["warm_start_steps"] == 1


def test_bad_warm_start_flags_exit_2(run_cli, tmp_path):
    for args, why in ((["--warm-start", "gcc"], "bad --warm-start"),
                      (["--warm-start", "builtin", "--warm-start-steps", "9"], "--warm-start-steps must be 0..4"),
                      (["--warm-start-steps", "1"], "needs --warm-start builtin")):
        rc, _, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", "compat:fake@http://127.0.0.1:9/v1",
                             "--steps", "4", "--out", tmp_path / "r", *args, *JUDGE)
        assert rc == 2 and why in err and len(err.strip().splitlines()) == 1, err
    rc, _, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", "builtin", "--warm-start", "builtin",
                         "--out", tmp_path / "r", *JUDGE)
    assert rc == 2 and "nothing to warm-start" in err, err


@pytest.mark.parametrize("reject,code", [(401, "unauthenticated"), (403, "unauthenticated"), (404, "not_found"),
                                         ("quota", "resource_exhausted")])
def test_a_provider_that_rejects_the_run_exits_2(run_cli, server, tmp_path, reject, code):
    script = Script(reject=reject)
    out = tmp_path / "run"
    rc, stdout, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", server(script), "--steps", "3",
                              "--out", out, *JUDGE)
    assert rc == 2, err[-3000:]
    assert len(script.requests) == 1, "exactly the one call it takes"
    errors = [l for l in err.splitlines() if l.startswith("adaexplore: ")]
    assert len(errors) == 1, err
    assert "the LLM provider rejected the run (%s)" % code in errors[0] and "--resume" in errors[0]
    task = json.loads((out / "summary.json").read_text())["tasks"][0]
    assert task["status"].startswith("stopped: ") and task["stop_code"] == code


def test_a_rejected_key_stops_every_task_of_a_bench(run_cli, server, tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / EXAMPLE_TASK.name).write_text(EXAMPLE_TASK.read_text())
    (tasks / "2_AffineSigmoid.py").write_text((ROOT / "tests" / "corpus" / "builtin" / "affine_sigmoid.py").read_text())
    script = Script(reject=401)
    out = tmp_path / "run"
    rc, stdout, err = run_cli("bench", tasks, "--proposer", server(script), "--steps", "3", "--jobs", "1",
                              "--out", out, *JUDGE)
    assert rc == 2, err[-3000:]
    assert len(script.requests) == 1, "no task called the provider after it rejected the key"
    results = json.loads((out / "summary.json").read_text())["tasks"]
    assert len(results) == 2
    for t in results:
        assert t["status"].startswith("stopped: ") and t["stop_code"] == "unauthenticated", t
    assert len([l for l in err.splitlines() if l.startswith("adaexplore: ")]) == 1, err

"""`adaexplore adapt` end to end on the CPU: the same mistake over several
tasks becomes one rule whose score counts the repeats, and a later optimize
run carries it in its prompts."""

import json
import os
import shutil
import subprocess

from conftest import EXAMPLE_TASK
from fake_llm_server import Script, serve

JUDGE = ["--device", "cpu", "--trials", "1", "--no-time"]


def test_repeated_mistake_becomes_one_scored_rule_and_reaches_prompts(binary, worker_python, tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for i in range(3):
        shutil.copy(EXAMPLE_TASK, tasks / ("%d_Copy.py" % (i + 1)))
    env = dict(os.environ, ADAEXPLORE_PYTHON=worker_python, ADAEXPLORE_CACHE_DIR=str(tmp_path / "cache"))
    script = Script(always_broken=True)
    server = serve(script)
    url = "compat:fake@http://127.0.0.1:%d/v1" % server.server_address[1]
    memory = tmp_path / "memory.txt"
    try:
        p = subprocess.run([str(binary), "adapt", "--tasks", str(tasks), "--proposer", url, "--memory", str(memory),
                            "--steps", "1", "--out", str(tmp_path / "adapt")] + JUDGE,
                           capture_output=True, text=True, env=env, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        lines = [l for l in memory.read_text().splitlines() if l.strip()]
        assert len(lines) == 1, lines
        rule, score = lines[0].rsplit("||", 1)
        assert rule.startswith("You cannot leave a binary operator dangling")
        assert float(score) == 3
        assert "added 1 new and counted 2 repeats" in p.stdout
        # A later run shows the rule (score 3 reaches the default threshold).
        script.requests.clear()
        p = subprocess.run([str(binary), "optimize", str(EXAMPLE_TASK), "--proposer", url, "--memory", str(memory),
                            "--steps", "1", "--out", str(tmp_path / "later")] + JUDGE,
                           capture_output=True, text=True, env=env, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        proposer_prompts = [r for r in script.requests if "Write a new, faster implementation" in r]
        assert proposer_prompts and "Rules learnt from earlier mistakes" in proposer_prompts[0]
        assert "You cannot leave a binary operator dangling" in proposer_prompts[0]
    finally:
        server.shutdown()


def test_adapt_needs_a_memory(run_cli, tmp_path):
    rc, out, err = run_cli("adapt", "--tasks", tmp_path, "--proposer", "replay:x")
    assert rc == 2
    assert "--memory" in err

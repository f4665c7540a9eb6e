"""The prompts' device line ({{hardware}}) end to end on the CPU: the fixed CPU
line by default, --hardware replacing it, and --resume asking with the line the
run stored (so its LLM calls are found in the store)."""

import json
import sqlite3

from conftest import EXAMPLE_TASK
from fake_llm_server import Script, serve

JUDGE = ["--device", "cpu", "--trials", "2", "--iters", "2", "--warmup", "1"]
CPU_LINE = "the CPU (Triton's interpreter; timings are CPU figures)"


def stored_config(run_dir):
    db = sqlite3.connect(str(run_dir / "run.sqlite"))
    config = json.loads(db.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])
    db.close()
    return config


def test_the_cpu_line_by_default_and_hardware_replaces_it(run_cli, tmp_path):
    script = Script(mode="failing")
    server = serve(script)
    proposer = "compat:fake@http://127.0.0.1:%d/v1" % server.server_address[1]
    try:
        out = tmp_path / "default"
        rc, _, err = run_cli("optimize", EXAMPLE_TASK, "--proposer", proposer, "--steps", "1", "--search", "bon",
                             "--out", out, *JUDGE)
        assert rc == 0, err[-3000:]
        assert script.requests and all(CPU_LINE in r for r in script.requests), script.requests[:1]
        assert stored_config(out)["hardware"] == CPU_LINE

        script.requests.clear()
        out = tmp_path / "given"
        args = ["optimize", EXAMPLE_TASK, "--proposer", proposer, "--steps", "2", "--search", "bon",
                "--out", out, *JUDGE]
        rc, _, err = run_cli(*args, "--hardware", "an imaginary accelerator")
        assert rc == 0, err[-3000:]
        asked = len(script.requests)
        assert asked == 2 and all("an imaginary accelerator" in r and CPU_LINE not in r for r in script.requests)
        assert stored_config(out)["hardware"] == "an imaginary accelerator"

        # --resume without --hardware asks the stored line: every call is found in the store.
        rc, stdout, err = run_cli(*args, "--resume")
        assert rc == 0, err[-3000:]
        assert len(script.requests) == asked, script.requests[asked:][:1]
        assert stored_config(out)["hardware"] == "an imaginary accelerator"
    finally:
        server.shutdown()

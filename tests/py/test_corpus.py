"""The adversarial, fault and honest corpus, judged on the CPU through the real CLI.

Each corpus file says in its header what the judge must conclude:
    # expect: status=A|B flag=F
    # expect-gpu: ... (what the GPU suite expects instead, where a GPU differs)
    # args: extra CLI arguments (an --iters or --warmup here replaces the default)
    # check: no_connection | no_leftover_process
"""

import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import CORPUS, EXAMPLE_TASK, last_json

FILES = sorted(p for d in ("honest", "adversarial", "faults") for p in (CORPUS / d).glob("*.py"))


def header(path):
    text = path.read_text()
    exp = re.search(r"^# expect: (.*)$", text, re.M).group(1)
    fields = dict(kv.split("=", 1) for kv in exp.split())
    args = re.search(r"^# args: (.*)$", text, re.M)
    checks = re.findall(r"^# check: (\S+)$", text, re.M)
    return fields["status"].split("|"), fields.get("flag"), (args.group(1).split() if args else []), checks


def with_defaults(extra, defaults=(("--iters", "3"), ("--warmup", "1"))):
    """The corpus's timing settings, unless the case's own arguments set them."""
    args = []
    for flag, value in defaults:
        if flag not in extra:
            args += [flag, value]
    return args + list(extra)


def leftover(pattern):
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    return out


class Listener:
    """A TCP listener on 127.0.0.1 that records whether anyone connected."""

    def __init__(self, port):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_corpus_case(path, run_cli):
    statuses, flag, extra, checks = header(path)
    listener = Listener(47231) if "no_connection" in checks else None
    target = Path("/tmp/adaexplore-redteam-target")
    if path.stem == "write_outside_scratch":
        target.write_text("original\n")
    try:
        rc, out, err = run_cli("eval", EXAMPLE_TASK, path, "--device", "cpu", "--json", "--no-cache",
                               *with_defaults(extra))
    finally:
        if listener:
            time.sleep(0.3)
            listener.close()
    assert rc == 0, err
    v = last_json(out)
    assert v["status"] in statuses, "%s: %s (%s)" % (path.name, v["status"], v["error"][:2000])
    assert v["correct"] == (v["status"] == "ok")
    if flag:
        assert flag in v["flags"], v["flags"]
    if v["status"] != "ok":
        assert v["error"], "a failed verdict must say why"
    if listener:
        assert listener.connections == 0, "the candidate reached the network"
    if "no_leftover_process" in checks:
        time.sleep(0.5)
        assert not leftover("sleep 4242"), "a process the candidate started outlived the judge"
    if path.stem == "write_outside_scratch":
        if "readonly-fs" not in v["isolation"]:
            target.unlink()
            pytest.skip("no read-only file system here (isolation: %s)" % v["isolation"])
        assert target.read_text() == "original\n"
        assert "Read-only file system" in v["error"]
        target.unlink()


def test_mismatch_error_names_index_and_values(run_cli):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, CORPUS / "adversarial" / "zeros.py", "--device", "cpu",
                           "--json", "--no-cache", "--no-time")
    v = last_json(out)
    assert v["status"] == "mismatch"
    assert re.search(r"differs at index \[\d+, \d+\]: got .*, expected", v["error"]), v["error"]
    assert v["max_abs_error"] > 0


def test_compile_error_carries_the_message(run_cli):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, CORPUS / "faults" / "syntax_error.py", "--device", "cpu",
                           "--json", "--no-cache")
    v = last_json(out)
    assert v["status"] == "compile_error"
    assert "SyntaxError" in v["error"]


def test_crash_reports_signal(run_cli):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, CORPUS / "faults" / "segfault.py", "--device", "cpu",
                           "--json", "--no-cache")
    v = last_json(out)
    assert v["status"] == "crashed"
    assert "signal 11" in v["error"]


def test_honest_output_is_printed_back(run_cli):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, CORPUS / "honest" / "prints_a_lot_but_ok.py", "--device", "cpu",
                           "--json", "--no-cache", "--no-time")
    v = last_json(out)
    assert v["status"] == "ok"
    assert "debug: forward on" in v["output_tail"]
    assert "stderr works too" in v["output_tail"]

"""The candidate's first call runs on the device, so it shares the device as trials do and never
overlaps a timing run (another candidate's, or a baseline's, in this process or another): a
process holding the device's lock alone while the candidate is being imported keeps its first
call waiting until it lets go. The import itself may overlap (host work)."""

import fcntl
import os
import subprocess
import tempfile
import time
from pathlib import Path

from conftest import EXAMPLE_TASK, ROOT, last_json

# The example's Triton candidate, which marks its import, takes 2 s to import and stamps its
# first call. /dev/shm stays writable inside the sandbox.
CANDIDATE = (ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py").read_text() + '''

import os as _os
import time as _time

_MARKS = {marks!r}
open(_os.path.join(_MARKS, "imported"), "w").write(repr(_time.time()))
_time.sleep(2.0)
_forward = ModelNew.forward


def _stamped_forward(self, x):
    first = _os.path.join(_MARKS, "first_call")
    if not _os.path.exists(first):
        open(first, "w").write(repr(_time.time()))
    return _forward(self, x)


ModelNew.forward = _stamped_forward
'''


def test_the_first_call_waits_for_a_timing_run_that_holds_the_device(binary, worker_python, tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    marks = Path(tempfile.mkdtemp(prefix="ax-first-call-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None))
    cand = tmp_path / "cand.py"
    cand.write_text(CANDIDATE.format(marks=str(marks)))
    env = dict(os.environ, ADAEXPLORE_PYTHON=str(worker_python), ADAEXPLORE_CACHE_DIR=str(tmp_path / "cache"),
               ADAEXPLORE_LOCK_DIR=str(locks))
    p = subprocess.Popen([str(binary), "eval", str(EXAMPLE_TASK), str(cand), "--device", "cpu", "--json", "--no-cache",
                          "--iters", "2", "--warmup", "1", "--baselines", "none"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 120
        while not (marks / "imported").exists():
            assert p.poll() is None, p.communicate()
            assert time.time() < deadline, "the candidate was never imported"
            time.sleep(0.02)
        # A timing run elsewhere: the device's lock held alone for 5 s, from inside the import.
        with open(locks / "adaexplore-device-cpu.lock", "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            time.sleep(5.0)
            released = time.time()
            fcntl.flock(f, fcntl.LOCK_UN)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    v = last_json(out)
    assert v["status"] == "ok", (v.get("error"), v.get("flags"))
    first_call = float((marks / "first_call").read_text())
    imported = float((marks / "imported").read_text())
    # the import went on while the lock was held (it overlaps), the first call waited
    assert first_call >= released, (first_call - imported, released - imported)
    assert v["phases"]["wait"] > 2.0, v["phases"]

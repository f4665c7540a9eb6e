"""The first call's deadline: a candidate that hangs in its first call is a `timeout` after
max(--call-timeout, 100x the reference's call), not at the build deadline, while the builds
that call starts (here torch.compile with a slow backend) have the build deadline to themselves."""

import io
import sys
import time

from conftest import EXAMPLE_TASK, ROOT, last_json

sys.path.insert(0, str(ROOT / "python"))

from adaexplore_worker.builds import BuildEvents  # noqa: E402

HEADER = '''import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale
'''

HANGS = HEADER + '''
    def forward(self, x):
        while True:
            time.sleep(0.05)
'''

# The example's Triton kernel, whose first call also compiles something for 6 s (a
# torch.compile backend that sleeps).
SLOW_BUILD = (ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py").read_text() + '''

def _slow_backend(gm, example_inputs):
    time.sleep(6)
    return gm.forward


_built = torch.compile(lambda x: x + 1, backend=_slow_backend, dynamic=False)
_forward = ModelNew.forward


def _forward_after_a_build(self, x):
    _built(x)
    return _forward(self, x)


ModelNew.forward = _forward_after_a_build
'''.replace("def _slow_backend", "import time\n\n\ndef _slow_backend")


def judge(run_cli, tmp_path, source, *extra):
    cand = tmp_path / "cand.py"
    cand.write_text(source)
    t0 = time.time()
    rc, out, err = run_cli("eval", EXAMPLE_TASK, cand, "--device", "cpu", "--json", "--no-cache", "--iters", "2",
                           "--warmup", "1", *extra)
    assert rc == 0, err
    return last_json(out), time.time() - t0


def test_a_hung_first_call_times_out_at_the_call_deadline(run_cli, tmp_path):
    v, wall = judge(run_cli, tmp_path, HANGS, "--call-timeout", "3")
    assert v["status"] == "timeout", v
    assert "the first call" in v["error"] and "the call ran longer than 3 s" in v["error"], v["error"]
    # The build deadline (600 s) is far away: the verdict comes within seconds of the call's.
    assert wall < 60, wall


def test_the_first_calls_builds_do_not_count_against_the_call(run_cli, tmp_path):
    v, _ = judge(run_cli, tmp_path, SLOW_BUILD, "--call-timeout", "3")
    assert v["status"] == "ok", v["error"]
    assert v["phases"]["warm_build"] >= 5.5, v["phases"]


def test_a_slow_build_still_has_the_build_deadline(run_cli, tmp_path):
    v, wall = judge(run_cli, tmp_path, SLOW_BUILD, "--call-timeout", "3", "--compile-timeout", "4")
    assert v["status"] == "timeout", v
    assert "builds ran longer than" in v["error"], v["error"]
    assert wall < 60, wall


def test_build_events_nest_and_close_when_the_builder_raises():
    out = io.StringIO()
    events = BuildEvents(out)

    def inner():
        raise RuntimeError("compiler failed")

    outer = events.wrap(lambda: events.wrap(inner)())
    try:
        outer()
    except RuntimeError:
        pass
    events.start()
    events.reset()
    events.reset()
    lines = out.getvalue().splitlines()
    assert lines == ['{"event": "build", "state": "start"}', '{"event": "build", "state": "end"}'] * 2

"""The judge's own defences when the candidate's process belongs entirely to the candidate.

Each test runs the real CLI with a worker package whose candidate role was rewritten before
anything else ran (ADAEXPLORE_WORKER_DIR), so the in-process guard sees nothing: what the judge
concludes rests on what the parent process holds itself, its clock, the seeds it derives and
the indices it checks. The honest run of the same package shows the rewrite alone changes
nothing.
"""

import shutil

import pytest

from conftest import EXAMPLE_TASK, ROOT, last_json

CANDIDATE = ROOT / "tests" / "corpus" / "honest" / "fused_triton.py"

# Every figure of the timing reply scaled by SCALE: a timer wrapped where no check looks.
SCALED_TIMES = '''
_op_time = CandidateRole.op_time


def _scaled_time(self, req):
    resp = _op_time(self, req)
    for key in ("stream_ms", "device_ms", "host_ms"):
        if key in resp:
            resp[key] = [t * SCALE for t in resp[key]]
    return resp


CandidateRole.op_time = _scaled_time
'''

# Zeros in every timed call; the `final` replies hand over an output computed correctly for a
# seed of the worker's choosing, and name that seed.
LYING_SEED = '''
_op_time = CandidateRole.op_time
_LIE = 12345


def _cheap_time(self, req):
    model = self.model
    self.model = lambda x: torch.zeros_like(x)
    try:
        return _op_time(self, req)
    finally:
        self.model = model


def _lying_final(self, req):
    with torch.no_grad():
        out = self.model(*common.make_inputs(self.task, _LIE, self.device))
    files = self._write(common.as_tensor_list(out), req["out_dir"], "lie_" + req.get("pick", "checked"),
                        req.get("transport"))
    return {"ok": True, "final": {"seed": _LIE, "index": 0, "outputs": files}}


CandidateRole.op_time = _cheap_time
CandidateRole.op_final = _lying_final
'''

# Zeros out of every timed call but the checked one (each call still computes, so every call
# takes as long and the judge's clock has nothing to object to); the timing reply names the
# checked call as the sampled one too, and `final` hands over its output for both.
SAMPLE_IS_CHECKED = '''
_op_time = CandidateRole.op_time


def _one_honest_call(self, req):
    model, calls = self.model, [0]
    honest_call = req["warmup"] + req["check_index"]

    def forward(x):
        calls[0] += 1
        out = model(x)
        return out if calls[0] == honest_call + 1 else torch.zeros_like(out)

    self.model = forward
    try:
        resp = _op_time(self, req)
    finally:
        self.model = model
    if resp.get("ok"):
        resp["sample_index"] = resp["checked_index"]
        self._kept["sample"] = self._kept["checked"]
    return resp


CandidateRole.op_time = _one_honest_call
'''


@pytest.fixture()
def compromised(tmp_path):
    """A copy of the worker package with `patch` appended to its candidate role."""

    def make(patch):
        root = tmp_path / "worker"
        shutil.copytree(ROOT / "python" / "adaexplore_worker", root / "adaexplore_worker",
                        ignore=shutil.ignore_patterns("__pycache__"))
        with open(root / "adaexplore_worker" / "candidate.py", "a") as f:
            f.write("\n" + patch)
        return {"ADAEXPLORE_WORKER_DIR": str(root)}

    return make


def judge(run_cli, env, iters=3):
    rc, out, err = run_cli("eval", EXAMPLE_TASK, CANDIDATE, "--device", "cpu", "--json", "--no-cache",
                           "--iters", str(iters), "--warmup", "1", env_extra=env)
    assert rc == 0, err
    return last_json(out)


def test_an_untouched_copy_of_the_worker_passes(run_cli, compromised):
    v = judge(run_cli, compromised(SCALED_TIMES.replace("SCALE", "1.0")), iters=10)
    assert v["status"] == "ok", v["error"]
    assert "timing_forged" not in v["flags"]


@pytest.mark.parametrize("scale", ["0.5", "0.3"])
def test_times_forged_where_no_guard_looks_are_rejected_by_the_judges_clock(run_cli, compromised, scale):
    # Ten timed calls: the CPU's bound allows for a loaded machine; more calls tell forgery from scatter.
    v = judge(run_cli, compromised(SCALED_TIMES.replace("SCALE", scale)), iters=10)
    assert v["status"] == "rejected", (v["status"], v["error"])
    assert "timing_forged" in v["flags"]
    assert "judge's clock" in v["error"]
    assert "harness_tampering" not in v["flags"]  # the guard saw nothing: the clock alone caught it


def test_the_timed_outputs_are_compared_on_the_judges_seeds_not_the_workers(run_cli, compromised):
    v = judge(run_cli, compromised(LYING_SEED))
    assert v["status"] == "mismatch", (v["status"], v["error"])
    assert "timed_output_mismatch" in v["flags"]


def test_a_sampled_call_that_is_the_checked_one_is_rejected(run_cli, compromised):
    v = judge(run_cli, compromised(SAMPLE_IS_CHECKED))
    assert v["status"] == "rejected", (v["status"], v["error"])
    assert "protocol_violation" in v["flags"]
    assert "sampled call" in v["error"]

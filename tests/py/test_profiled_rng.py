"""The candidate worker's profiled calls each start from the generators' state after the
inputs were made, so a forward that draws random numbers (dropout in training mode) returns
in its compared last call what the reference's single call returned."""

import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from adaexplore_worker.candidate import CandidateRole  # noqa: E402


class _NoProfiler:
    """Stands in for torch.profiler.profile where no CUDA profiler exists (CPU-only torch):
    what is checked here is the generators' state around the calls, not the timings."""

    def __init__(self, **kw):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def events(self):
        return []


def test_profiled_calls_replay_the_same_random_draws(monkeypatch):
    if not torch.cuda.is_available():
        monkeypatch.setattr(torch.profiler, "profile", _NoProfiler)
    role = CandidateRole(None)
    role.device = "cpu"
    role.model = torch.nn.Dropout(p=0.5)  # training mode: a fresh mask per call
    torch.manual_seed(5)
    x = torch.ones(4096)
    state = torch.get_rng_state()
    want = role.model(x)  # the reference's one call from this state
    torch.set_rng_state(state)
    _, _, got = role._profiled([x], 0, 3)
    assert torch.equal(got, want)
    # and the calls really draw: without the replay the third mask differs
    torch.set_rng_state(state)
    for _ in range(3):
        third = role.model(x)
    assert not torch.equal(third, want)

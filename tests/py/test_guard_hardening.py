"""The candidate worker's own defences, in process: the guard's snapshot and the timer's kept
outputs (docs/judge.md, "The guard" and "Per candidate", step 6)."""

import gc
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from adaexplore_worker import common, guard as guard_mod  # noqa: E402
from adaexplore_worker.candidate import CandidateRole  # noqa: E402

from conftest import EXAMPLE_TASK  # noqa: E402


_COUNTER = []


@pytest.fixture()
def role():
    """A candidate role as `load` leaves it just before the candidate's import."""
    if not _COUNTER:  # the launch hooks, once per process (each install wraps the last one)
        _COUNTER.append(guard_mod.LaunchCounter())
    r = CandidateRole(None, None)
    r.counter = _COUNTER[0]
    r.task = common.load_module(str(EXAMPLE_TASK), "hardening_task")
    r.own = []
    r._snapshot()
    return r


def test_an_untouched_harness_reports_nothing(role):
    timer = common.Timer("cpu", 0, after_call=role.guard.after_call)
    role.guard.watch(timer, "the timer")
    with torch.no_grad():
        timer.run(lambda x: x * 2, role.task, [1, 2, 3], 50, 1, 3)
    assert role.guard.tampered() == []
    assert role.guard.new_threads() == []


def _undo(obj, name, value):
    setattr(obj, name, value)


@pytest.mark.parametrize("case", ["class attribute", "code object", "closure cell", "new module attribute",
                                  "class of an object", "trace hook", "torch function mode", "gc callback",
                                  "task function"])
def test_a_change_is_reported_even_when_undone(role, case):
    g = role.guard
    undo = []
    if case == "class attribute":
        run = common.Timer.run
        common.Timer.run = lambda self, *a, **k: run(self, *a, **k)
        undo.append(lambda: _undo(common.Timer, "run", run))
        want = "adaexplore_worker.common.Timer.run"
    elif case == "code object":
        code = torch.cuda.Event.elapsed_time.__code__

        class Halved(torch.cuda.Event):
            def elapsed_time(self, end_event):
                return super().elapsed_time(end_event) * 0.5

        torch.cuda.Event.elapsed_time.__code__ = Halved.elapsed_time.__code__
        undo.append(lambda: setattr(torch.cuda.Event.elapsed_time, "__code__", code))
        want = "torch.cuda.Event.elapsed_time (code)"
    elif case == "closure cell":
        from torch.utils import cpp_extension
        wrapper = cpp_extension.load_inline  # the launch counter's wrapper closes over the original
        cell = wrapper.__closure__[0]
        before = cell.cell_contents
        cell.cell_contents = types.SimpleNamespace(_record=lambda name: None)
        undo.append(lambda: setattr(cell, "cell_contents", before))
        want = "torch.utils.cpp_extension.load_inline (code)"
    elif case == "new module attribute":
        common.__dict__["_perf_counter_backup"] = common._perf_counter
        undo.append(lambda: common.__dict__.pop("_perf_counter_backup"))
        want = "adaexplore_worker.common._perf_counter_backup"
    elif case == "class of an object":
        cls = type(role)
        role.__class__ = type("Liar", (cls,), {})
        undo.append(lambda: setattr(role, "__class__", cls))
        want = "the candidate role (class)"
    elif case == "trace hook":
        sys.setprofile(lambda *a: None)
        undo.append(lambda: sys.setprofile(None))
        want = "sys.getprofile()"
    elif case == "torch function mode":
        mode = torch.overrides.TorchFunctionMode()
        mode.__enter__()
        undo.append(lambda: mode.__exit__(None, None, None))
        want = "torch function modes"
    elif case == "gc callback":
        def callback(phase, info):
            return None
        gc.callbacks.append(callback)
        undo.append(lambda: gc.callbacks.remove(callback))
        want = "gc.callbacks"
    else:
        get_inputs = role.task.get_inputs
        role.task.get_inputs = lambda: [torch.randn(1, 1024)]
        undo.append(lambda: _undo(role.task, "get_inputs", get_inputs))
        want = "hardening_task"
    try:
        g.check()
    finally:
        for u in undo:
            u()
    found = g.tampered()
    assert any(name.startswith(want) for name in found), found


def test_after_each_timed_call_the_timers_part_is_compared(role):
    run = common.Timer._timed
    common.Timer._timed = lambda self, *a, **k: run(self, *a, **k)
    try:
        role.guard.after_call()
    finally:
        common.Timer._timed = run
    assert role.guard.tampered() == ["adaexplore_worker.common.Timer._timed"]


def test_the_checked_call_agrees_with_the_judges():
    # The same table as the judge's TimingRules.TheCheckedCallIsTheLastToReuseAnInputSet.
    table = {(10, 50, 3): 49, (2, 5, 3): 4, (1, 3, 3): 0, (0, 3, 3): 2, (0, 5, 3): 4, (0, 4, 3): 3,
             (1, 1, 3): 0, (3, 7, 1): 6}
    for (warmup, iters, sets), want in table.items():
        assert common.checked_call(warmup, iters, sets) == want, (warmup, iters, sets)


def test_the_sampled_call_is_any_other_timed_call():
    task = common.load_module(str(EXAMPLE_TASK), "sampling_task")
    seen = set()
    for _ in range(80):
        _, kept = common.Timer("cpu", 0).run(lambda x: x[:1, :4] * 1, task, [1, 2, 3], 50, 1, 4, check_index=2)
        assert kept["checked"][0] == 2
        seen.add(kept["sample"][0])
    assert seen == {0, 1, 3}


def test_kept_outputs_are_taken_as_their_call_returned():
    """A forward that returns a tensor whose work finishes later (here: the next call writes it)
    is checked on what it held when its call returned."""
    task = common.load_module(str(EXAMPLE_TASK), "late_task")
    shared = torch.zeros(4)
    calls = [0]

    def forward(x):
        calls[0] += 1
        shared.fill_(calls[0])  # finishes the previous call's output, late
        return shared

    _, kept = common.Timer("cpu", 0).run(forward, task, [1, 2, 3], 50, 1, 3, check_index=0)
    index, out = kept["checked"]
    assert out.tolist() == [2.0] * 4  # warm-up was call 1; timed call 0 is call 2
    j, sample = kept["sample"]
    assert sample.tolist() == [float(j + 2)] * 4


def test_threads_left_running_by_a_timed_call_are_seen_even_when_joined_later(role):
    pending = []

    def forward(x):
        if len(pending) < 2:
            t = threading.Thread(target=time.sleep, args=(0.5,), name="late_work")
            t.start()
            pending.append(t)
        else:
            for t in pending:
                t.join()
        return x * 2

    timer = common.Timer("cpu", 0, after_call=role.guard.after_call)
    timer.run(forward, role.task, [1, 2, 3], 50, 0, 3)
    assert not any(t.is_alive() for t in pending)
    assert role.guard.new_threads() == ["late_work"]
    assert guard_mod.Guard is type(role.guard)

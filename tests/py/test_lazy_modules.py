"""Lazy modules in the judge's worker: materialised alike in the reference and in a candidate,
whatever ran before, without moving running statistics or the training flags."""

import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from adaexplore_worker import common  # noqa: E402

TASK = ROOT / "tests" / "corpus" / "builtin" / "lazy_modules.py"


def load():
    return common.load_module(str(TASK), "lazy_task_under_test")


def test_reference_and_subclass_get_the_same_weights():
    task = load()
    a = common.build_model(task.Model, common.init_inputs(task), 7, "cpu", task)
    torch.rand(1000)  # the generator moved in between, as between the judge's steps

    class ModelNew(task.Model):
        def forward(self, x):  # a candidate whose forward would create nothing itself
            raise AssertionError("the task's forward materialises a subclass")

    b = common.build_model(ModelNew, common.init_inputs(task), 7, "cpu", task)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and sa
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    assert not common.has_lazy_parameters(a)
    # evaluation mode for the materialising call: the batch norm's statistics did not move,
    # and the training flags are back
    assert int(a.bn.num_batches_tracked) == 0
    assert torch.equal(a.bn.running_mean, torch.zeros_like(a.bn.running_mean))
    assert all(m.training for m in a.modules())


def test_a_model_without_lazy_modules_is_left_alone():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    common.materialize(m, load(), 0, "cpu")
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())


def test_outputs_agree_without_a_warm_up_call():
    task = load()
    a = common.build_model(task.Model, common.init_inputs(task), 3, "cpu", task)
    b = common.build_model(task.Model, common.init_inputs(task), 3, "cpu", task)
    x = common.make_inputs(task, 11, "cpu")
    with torch.no_grad():
        assert torch.equal(a(*x), b(*x))

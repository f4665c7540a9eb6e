"""The tracer behind the builtin compiler: shape questions answered while tracing."""

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
torch = pytest.importorskip("torch")

from adaexplore_worker import tracing  # noqa: E402


def _targets(graph):
    return [n["target"] for n in graph["nodes"] if n["op"] not in ("placeholder", "output")]


class ShapeBranch(torch.nn.Module):
    def forward(self, x):
        if x.size(1) % 2 == 0:
            x = x * 2.0
        else:
            x = x - 1.0
        return x.view(x.shape[0], -1).relu()


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_branch_on_a_shape_takes_the_traced_inputs_side(device):
    graph = tracing.trace(ShapeBranch(), [torch.randn(3, 4, 5, device=device)])
    assert _targets(graph) == ["mul", "view", "relu"]
    view = [n for n in graph["nodes"] if n["target"] == "view"][0]
    assert [a.get("value") for a in view["args"][1:]] == [3, -1]
    assert graph["nodes"][-2]["out"]["shape"] == [3, 20]
    graph = tracing.trace(ShapeBranch(), [torch.randn(3, 5, device=device)])
    assert _targets(graph) == ["sub", "view", "relu"]


class ValueBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def test_a_branch_on_tensor_values_still_cannot_be_traced():
    with pytest.raises(Exception) as info:
        tracing.trace(ValueBranch(), [torch.randn(4)])
    assert "control flow" in str(info.value)


class LongLoop(torch.nn.Module):
    def forward(self, x):
        for i in range(x.size(0)):
            x = x + 1.0
        return x


def test_a_loop_over_a_size_unrolls_up_to_a_limit():
    graph = tracing.trace(LongLoop(), [torch.randn(5, 2)])
    assert _targets(graph) == ["add"] * 5
    with pytest.raises(RuntimeError, match="more than %d operations" % tracing.MAX_NODES):
        tracing.trace(LongLoop(), [torch.randn(tracing.MAX_NODES + 1, 1, device="meta")])


class Factories(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(64.0))

    def forward(self, x):
        n = x.size(-1)
        z = torch.ones(x.size(0), n, device=x.device) * self.table[:n]
        first, second = torch.chunk(x, 2, dim=0)
        return torch.cat([first + z[:1], second], dim=0)


def test_factories_and_buffer_slices_stay_operations():
    ones = torch.ones
    graph = tracing.trace(Factories(), [torch.randn(4, 6)])
    targets = _targets(graph)
    assert "ones" in targets and "table" in targets
    assert not any(t.startswith("_tensor_constant") for t in targets)
    assert [n["out"]["shape"] for n in graph["nodes"] if n["target"] == "ones"] == [[4, 6]]
    # The torch functions are themselves again after tracing.
    assert torch.ones is ones


class Unpacks(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x)  # no shape without the values
        a, b = idx.unbind(1)
        return a + b


def test_a_value_of_unknown_shape_still_unpacks_into_the_names_given():
    # On the meta device nonzero has no shape: the unpacking counts the names.
    tracer = tracing._shape_tracer([torch.ones(3, 3, device="meta")])
    g = tracer.trace(Unpacks())
    unbind = [n for n in g.nodes if n.target == "unbind"][0]
    assert tracer.values[unbind] is tracing._UNKNOWN
    graph = tracing.trace(Unpacks(), [torch.ones(3, 3)])
    assert _targets(graph).count("getitem") == 2

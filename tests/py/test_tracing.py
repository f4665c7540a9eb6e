"""The tracer behind the builtin compiler: shape questions answered while tracing."""

import json
import pathlib
import sys

import pytest

from conftest import DATASETS, ROOT

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


class ValueGate(torch.nn.Module):
    """Branches on tensor values: cannot be traced, only called."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.abs().max().item() > 1.5:
            return self.lin(x)
        return -x


class GatedBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = ValueGate()
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(self.gate(x) * 2.0 + 1.0)


class GatedNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([GatedBlock(), GatedBlock()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x).relu()
        return x - 0.5


def test_an_untraceable_submodule_stays_whole_and_the_rest_is_traced():
    torch.manual_seed(0)
    model, x = GatedNet(), torch.randn(3, 4)
    graph = tracing.trace(model, [x])
    calls = [(n["target"], n["module"]["class"]) for n in graph["nodes"] if n["op"] == "call_module"]
    # The innermost culprit (not its block) is kept whole; the rest is traced.
    assert calls == [("blocks.0.gate", "ValueGate"), ("blocks.0.norm", "LayerNorm"),
                     ("blocks.1.gate", "ValueGate"), ("blocks.1.norm", "LayerNorm")]
    assert _targets(graph).count("relu") == 2 and "sub" in _targets(graph)
    gm = tracing.traced_module(model, [x])
    with torch.no_grad():
        torch.testing.assert_close(gm(x), model(x))
    # Tracing it left the model as it was.
    assert all(not isinstance(v, torch.fx.Proxy) for m in model.modules() for v in vars(m).values())


class ValueBranchAtTop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = GatedBlock()

    def forward(self, x):
        x = self.inner(x)
        if x.sum() > 0:
            return x * 2
        return x


def test_a_top_level_forward_that_cannot_be_traced_still_fails_with_its_reason():
    with pytest.raises(Exception) as info:
        tracing.trace(ValueBranchAtTop(), [torch.randn(3, 4)])
    assert "control flow" in str(info.value)


class Defaults(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(6))
        self.h = torch.zeros(6)  # a plain tensor attribute, moved in forward

    def forward(self, x, h0=None, scale=2.0):
        if x.device != self.w.device:
            raise ValueError("x is on another device")
        if h0 is None:
            h0 = torch.ones(x.size(0), 6, device=x.device)
        self.h = self.h.to(x.device)
        mask = torch.tril(torch.ones(x.size(0), 6, device=x.device, dtype=bool))
        return (x * self.w + h0 + self.h).masked_fill(~mask, 0.0) * scale


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_default_arguments_device_checks_and_python_dtypes(device):
    model = Defaults().to(device)
    x = torch.randn(4, 6, device=device)
    graph = tracing.trace(model, [x])
    targets = _targets(graph)
    # h0 and scale keep their defaults (no placeholders), the device check
    # leaves nothing behind, dtype=bool is torch.bool.
    assert [n["name"] for n in graph["nodes"] if n["op"] == "placeholder"] == ["x"]
    assert "ne" not in targets and "_assert_is_none" not in targets
    ones = [n for n in graph["nodes"] if n["target"] == "ones"]
    assert ones[1]["kwargs"]["dtype"]["repr"] == "torch.bool"
    # The plain attribute is the model's own (generated code reads self.h), not a constant.
    h = [n for n in graph["nodes"] if n["target"] == "h"]
    assert h and "constant" not in h[0]
    if device == "cpu":
        gm = tracing.traced_module(model, [x])
        torch.testing.assert_close(gm(x), Defaults.forward(model, x))


class TupleInput(torch.nn.Module):
    def forward(self, x, state):
        h, c = state
        return x + h * c


def test_tuple_inputs_trace_on_the_meta_device():
    x, h, c = (torch.randn(2, 3) for _ in range(3))
    graph = tracing.trace(TupleInput(), [x, (h, c)])
    assert graph["nodes"][-2]["out"]["shape"] == [2, 3]
    meta = tracing._to_meta([x, (h, c)])
    assert meta[1][0].device.type == "meta"
    graph = tracing.trace(TupleInput(), meta)
    assert graph["nodes"][-2]["out"]["shape"] == [2, 3]


def test_a_constructor_that_reads_values_is_built_on_the_cpu(tmp_path, capsys):
    task = tmp_path / "task.py"
    task.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.rates = [r.item() for r in torch.linspace(0, 1, 3)]\n"
        "        self.lin = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x) * self.rates[1]\n"
        "def get_inputs():\n"
        "    return [torch.randn(2, 4)]\n"
        "def get_init_inputs():\n"
        "    return []\n")
    assert tracing._main([str(task)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"], out
    assert out["graph"]["inputs"][0]["shape"] == [2, 4]


LEVEL3 = DATASETS / "kernelbench" / "level3"


@pytest.mark.skipif(not LEVEL3.is_dir(), reason="KernelBench level3 not in shared/datasets")
def test_every_kernelbench_level3_problem_traces(capsys):
    # On the meta device, as the C++ KernelBench test traces them (a few seconds for all 25).
    files = sorted(str(p) for p in LEVEL3.glob("*.py"))
    assert tracing._main(files) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(results) == len(files)
    failed = {r["path"]: r["error"] for r in results if not r["ok"]}
    assert not failed
    graphs = {pathlib.Path(r["path"]).stem: r["graph"] for r in results}
    # Sequences too long to unroll stay one PyTorch call; einops is lowered.
    for name in ("35_LSTM", "37_LSTMCn", "39_GRU", "41_GRUBidirectional"):
        if name in graphs:
            assert any(n["op"] == "call_module" and n["module"]["class"] in ("LSTM", "GRU")
                       for n in graphs[name]["nodes"])
    if "49_Mamba2ReturnFinalState" in graphs:
        assert "reshape" in [n["target"] for n in graphs["49_Mamba2ReturnFinalState"]["nodes"]]


class _OnValues(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class _OnlyWrapper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _OnValues()

    def forward(self, x):
        return self.inner(x)


def test_a_model_that_is_nothing_but_an_untraceable_submodule_cannot_be_traced():
    with pytest.raises(Exception, match="control flow"):
        tracing.trace(_OnlyWrapper(), [torch.randn(3, 4)])

"""nn.LSTM / nn.GRU / nn.RNN traced as their cell equations (small) or kept whole (large)."""

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
torch = pytest.importorskip("torch")

from adaexplore_worker import recurrent, tracing  # noqa: E402


def _flat(v):
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _flat(x)]
    return [v]


class Wrap(torch.nn.Module):
    """Returns everything the recurrent module returns, so that all of it is compared."""

    def __init__(self, rnn, given_state):
        super().__init__()
        self.rnn = rnn
        self.given_state = given_state

    def forward(self, x, h0=None, c0=None):
        if not self.given_state:
            return self.rnn(x)
        return self.rnn(x, (h0, c0) if c0 is not None else h0)


CONFIGS = [
    dict(),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(batch_first=True, bias=False),
]


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join("%s=%s" % kv for kv in c.items()) or "plain")
@pytest.mark.parametrize("given_state", [False, True], ids=["zeros", "given"])
def test_small_modules_lower_to_their_cells_and_match_pytorch(cls, config, given_state):
    torch.manual_seed(0)
    rnn = cls(6, 5, **config)
    model = Wrap(rnn, given_state)
    steps, batch = 3, 2
    x = torch.randn((batch, steps, 6) if config.get("batch_first") else (steps, batch, 6))
    inputs = [x]
    if given_state:
        shape = (rnn.num_layers * (2 if rnn.bidirectional else 1), batch, 5)
        inputs.append(torch.randn(shape))
        if cls is torch.nn.LSTM:
            inputs.append(torch.randn(shape))
    gm = tracing.traced_module(model, inputs)
    ops = [(n.op, str(n.target)) for n in gm.graph.nodes]
    assert not any(op == "call_module" for op, _ in ops), ops  # unrolled, not one PyTorch call
    assert ("get_attr", "rnn.weight_hh_l0") in ops
    if rnn.bidirectional:
        assert ("get_attr", "rnn.weight_ih_l0_reverse") in ops
    with torch.no_grad():
        want, got = model(*inputs), gm(*inputs)
    # The same structure: (output, (h_n, c_n)) for an LSTM, (output, h_n) otherwise.
    assert type(got) is tuple and len(got) == 2
    assert isinstance(got[1], tuple) == (cls is torch.nn.LSTM)
    for w, g in zip(_flat(want), _flat(got), strict=True):
        assert w.shape == g.shape
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # ... and the JSON graph: pointwise gate operations the compiler can fuse.
    targets = [n["target"] for n in tracing.trace(model, inputs)["nodes"]]
    assert "tanh" in targets
    if cls is not torch.nn.RNN:
        assert "sigmoid" in targets


def test_an_unbatched_input_and_a_relu_rnn_lower_too():
    torch.manual_seed(0)
    for rnn in (torch.nn.RNN(4, 3, nonlinearity="relu", num_layers=2), torch.nn.GRU(4, 3), torch.nn.LSTM(4, 3)):
        x = torch.randn(5, 4)
        out = recurrent.lower(rnn, x, None, lambda n: getattr(rnn, n))
        for w, g in zip(_flat(rnn(x)), _flat(out), strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


class LevelThreeLSTM(torch.nn.Module):
    """The shape of KernelBench's LSTM problems: default-None states drawn on
    x's device, a state buffer moved with .to(x.device), the last step kept."""

    def __init__(self, steps_hint, layers):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, layers, batch_first=True)
        self.fc = torch.nn.Linear(16, 4)
        self.c0 = torch.zeros(layers, 2, 16)

    def forward(self, x, h0=None):
        if h0 is None:
            h0 = torch.zeros(self.lstm.num_layers, x.size(0), 16, device=x.device)
        self.c0 = self.c0.to(x.device)
        out, state = self.lstm(x, (h0, self.c0))
        return self.fc(out[:, -1, :]) + state[1][-1].sum()


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_large_module_stays_one_pytorch_call(device):
    layers = 2
    steps = recurrent.NODE_BUDGET // (17 * layers) + 1  # just over the budget
    model = LevelThreeLSTM(steps, layers).to(device)
    x = torch.randn(2, steps, 8, device=device)
    graph = tracing.trace(model, [x])
    modules = [n["module"]["class"] for n in graph["nodes"] if n["op"] == "call_module"]
    assert modules == ["LSTM", "Linear"]
    assert len(graph["nodes"]) < 40
    assert graph["nodes"][-2]["out"]["shape"] == [2, 4]
    if device == "cpu":
        gm = tracing.traced_module(model, [x])
        with torch.no_grad():
            torch.testing.assert_close(gm(x), model(x))
    # One step fewer fits the budget: unrolled.
    small = LevelThreeLSTM(steps, layers).to(device)
    graph = tracing.trace(small, [torch.randn(2, steps - 1, 8, device=device)])
    assert [n["module"]["class"] for n in graph["nodes"] if n["op"] == "call_module"] == ["Linear"]
    assert len(graph["nodes"]) <= recurrent.NODE_BUDGET + 40


def test_the_budget_counts_cells():
    lstm = torch.nn.LSTM(8, 8, num_layers=6)
    # KernelBench Level 3's sizes (512 steps, 6 layers) stay whole.
    assert recurrent.cell_nodes(lstm, (512, 10, 8)) > recurrent.NODE_BUDGET
    assert recurrent.lower(lstm, torch.randn(512, 10, 8, device="meta"), None, lambda n: getattr(lstm, n)) is None
    bi = torch.nn.GRU(8, 8, num_layers=2, bidirectional=True, batch_first=True)
    assert recurrent.cell_nodes(bi, (3, 7, 8)) == 7 * 2 * 2 * 19


@pytest.mark.parametrize("bias", [True, False])
def test_a_module_left_whole_reports_its_bias_flag_and_its_parameters(bias):
    layers, steps = 2, recurrent.NODE_BUDGET  # over the budget: one call
    model = torch.nn.Sequential(torch.nn.RNN(8, 16, layers, bias=bias, dropout=0.25, batch_first=True)).eval()
    graph = tracing.trace(model, [torch.randn(2, steps, 8)])
    (node,) = [n for n in graph["nodes"] if n["op"] == "call_module"]
    attrs = node["module"]["attrs"]
    assert attrs["bias"] is bias
    assert attrs["num_layers"] == layers and attrs["dropout"] == 0.25 and attrs["batch_first"] is True
    assert ("bias_ih_l0" in node["module"]["params"]) is bias

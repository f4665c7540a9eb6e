"""einops.rearrange / reduce / repeat lowered into view, permute, expand and reductions."""

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")
import einops.layers.torch  # noqa: E402 (the layers a model below uses)

from adaexplore_worker import einops_lowering, tracing  # noqa: E402

REARRANGE = [
    ("b (c l) h d -> b c l h d", dict(l=3)),
    ("b c h w -> b (h w) c", {}),
    ("b c h w -> (b h) w c", {}),
    ("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", dict(p1=2, p2=5)),
    ("b ... -> b (...)", {}),
    ("b c ... -> ... c b", {}),
    ("b (c l) ... -> b c l ...", dict(l=2)),
    ("b c h (w 1) -> 1 b c h w", {}),
    ("b c h w -> b c h w", {}),
]
REDUCE = [
    ("b c h w -> b c", "mean", {}),
    ("b c h w -> c", "sum", {}),
    ("b (c k) h w -> b c 1 w", "max", dict(k=2)),
    ("b c (h h2) (w w2) -> b c h w", "min", dict(h2=2, w2=5)),
    ("b c h w -> h", "prod", {}),
    ("b c h w -> b () c", "sum", {}),
    ("b c ... -> b c", "mean", {}),
]
REPEAT = [
    ("b c h w -> b c h w r", dict(r=3)),
    ("b c h w -> (r b) c (h 2) w", dict(r=2)),
    ("b c h w -> b c (h w) 3", {}),
    ("... w -> ... (w r)", dict(r=2)),
]


def _x():
    torch.manual_seed(0)
    return torch.randn(2, 6, 4, 10)


@pytest.mark.parametrize("pattern,axes", REARRANGE, ids=[p for p, _ in REARRANGE])
def test_rearrange_matches_einops(pattern, axes):
    x = _x()
    want = einops.rearrange(x, pattern, **axes)
    got = einops_lowering.rearrange(x, pattern, **axes)
    assert got.shape == want.shape
    assert torch.equal(got, want)


@pytest.mark.parametrize("pattern,reduction,axes", REDUCE, ids=["%s:%s" % (p, r) for p, r, _ in REDUCE])
def test_reduce_matches_einops(pattern, reduction, axes):
    x = _x()
    want = einops.reduce(x, pattern, reduction, **axes)
    got = einops_lowering.reduce(x, pattern, reduction, **axes)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("pattern,axes", REPEAT, ids=[p for p, _ in REPEAT])
def test_repeat_matches_einops(pattern, axes):
    x = _x()
    want = einops.repeat(x, pattern, **axes)
    got = einops_lowering.repeat(x, pattern, **axes)
    assert got.shape == want.shape
    assert torch.equal(got, want)


def test_a_list_of_tensors_is_stacked_first():
    xs = [torch.randn(3, 4) for _ in range(5)]
    assert torch.equal(einops_lowering.rearrange(xs, "n a b -> a (n b)"), einops.rearrange(xs, "n a b -> a (n b)"))


def test_bad_patterns_raise():
    with pytest.raises(ValueError):
        einops_lowering.rearrange(_x(), "b c h -> b c h")  # 3 axes for 4 dimensions
    with pytest.raises(ValueError):
        einops_lowering.rearrange(_x(), "b (c l) h w -> b c l h w")  # two unknowns in a group
    with pytest.raises(ValueError):
        einops_lowering.rearrange(_x(), "b c h w -> b c h")  # drops an axis


# Imported by name, as a task's source does.
from einops import rearrange, reduce, repeat  # noqa: E402


def chunked(x, block):
    return rearrange(x, "b (c l) h -> b c l h", l=block)


class UsesEinops(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = torch.nn.Sequential(einops.layers.torch.Rearrange("b c l h -> b h c l"),
                                        einops.layers.torch.Reduce("b h c l -> b h c", "max"))

    def forward(self, x):
        y = chunked(x, 4)  # through a helper of the module that defines the model
        s = reduce(y, "b c l h -> b c h", "mean")
        t = einops.repeat(s, "b c h -> b c h r", r=2)
        return self.pool(y).sum() + t.sum(dim=-1) + repeat(x.mean(), " -> 2 1 1")


def test_a_traced_model_holds_the_operations_not_einops_calls():
    model = UsesEinops()
    x = torch.randn(2, 8, 3)
    gm = tracing.traced_module(model, [x])
    targets = [getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes]
    assert not any("rearrange" in t or "reduce" in t or "repeat" in t or "pool" in t for t in targets), targets
    assert {"reshape", "permute", "mean", "expand", "amax"} <= set(targets), targets
    torch.testing.assert_close(gm(x), model(x))
    graph = tracing.trace(model, [x])
    assert all(n["op"] != "call_module" for n in graph["nodes"])
    # einops is itself again after tracing.
    assert rearrange is einops.rearrange and globals()["reduce"] is einops.reduce

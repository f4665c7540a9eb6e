# Builtin compiler corpus: sibling reductions, several sums, means, maxima and
# minima over the same rows of shared inputs (through elementwise work or read
# directly), which a plan computes in one kernel that reads each input once:
# rows in one tile, a few long rows (split over programs), a middle dimension,
# and a sum that reads an earlier reduction (so it cannot join it).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, u, z):
        dot = (x * y).sum(dim=1)
        far = (x - y).abs().amax(dim=1)
        avg = x.mean(dim=1)
        low = x.amin(dim=1)
        rows = dot + far * avg - low
        sq = (u * u).sum(dim=-1)
        tot = u.sum(dim=-1)
        top = u.amax(dim=-1)
        var = sq / u.shape[-1] - (tot / u.shape[-1]) ** 2
        mid = (z * 2.0).sum(dim=1) - (z - 0.5).amin(dim=1)
        s = x.sum(dim=1, keepdim=True)
        dep = (x * s).mean(dim=1)
        return rows, var + top, mid, dep


def get_inputs():
    return [torch.randn(48, 40), torch.randn(48, 40), torch.randn(2, 40000) + 2.0, torch.randn(4, 30, 16)]


def get_init_inputs():
    return []

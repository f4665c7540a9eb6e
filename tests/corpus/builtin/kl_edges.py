# Builtin compiler corpus: kl_div(log(p), t) is computed as t * log(t / p);
# its edge cases must stay PyTorch's: p of 0, negative or infinite, t of 0 or
# negative (NaN and infinities in the same places), and log(p) also read by
# another output.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, t):
        lp = torch.log(p)
        pointwise = F.kl_div(lp, t, reduction="none")
        total = F.kl_div(torch.log(p * 0.5 + 0.25), t.abs(), reduction="batchmean")
        return pointwise, total, lp + 1.0


def get_inputs():
    p = torch.rand(6, 50)
    p[0, :10] = 0.0
    p[1, :10] = -0.5
    p[2, :5] = float("inf")
    t = torch.rand(6, 50)
    t[:, :3] = 0.0
    t[3] = -0.25
    t[2, 5:8] = 0.0
    return [p, t]


def get_init_inputs():
    return []

# Builtin compiler corpus: reductions over dimensions of size 1 only, which the algebra plan
# turns into elementwise work (the element itself; softmax exp(x - x), log_softmax x - x),
# kept or dropped dimensions, the torch.max(x, dim)[0] spelling, and a real reduction
# beside them. Infinities and NaN: the rewrite must give PyTorch's result there too.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.relu(x) * 2.0
        a = torch.amax(y, dim=1)                        # [8, 6], the dimension dropped
        b = torch.logsumexp(x, dim=1, keepdim=True)
        c = torch.softmax(x, dim=1)
        d = torch.log_softmax(x, dim=-2)
        e = torch.max(x, dim=1, keepdim=True)[0]
        f = x.mean(dim=(1,), keepdim=True) + b
        g = torch.cumsum(x, dim=1)
        h = x.sum(dim=2)                                # a real reduction, [8, 1]
        return a, c + d, e * f, g, h


def get_inputs():
    x = torch.randn(8, 1, 6)
    x[0, 0, 0] = float("inf")
    x[1, 0, 1] = float("-inf")
    x[2, 0, 2] = float("nan")
    return [x]


def get_init_inputs():
    return []

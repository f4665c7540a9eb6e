# Builtin compiler corpus: cumulative sums and products (torch.cumsum,
# torch.cumprod, Tensor.cumsum) along the last dimension (rows longer than one
# tile, so the running total carries between tiles), along a middle dimension,
# and of elementwise work only the scan reads (a cumsum of x times a bool mask:
# prologue).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask, y):
        a = torch.cumsum(x, dim=1)
        b = torch.cumsum(x * mask, dim=-1)
        c = torch.cumprod(y, dim=1)
        d = (y * 0.5).cumsum(dim=2) + 1.0
        return a, b, c, d


def get_inputs():
    return [torch.rand(6, 5000), torch.rand(6, 5000) > 0.5, torch.rand(3, 40, 33) + 0.5]


def get_init_inputs():
    return []

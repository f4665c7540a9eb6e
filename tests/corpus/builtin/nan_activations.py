# Builtin compiler corpus: NaN through every operator that the GPU's min/max
# instructions would otherwise drop it in (relu, clamp, hardtanh, relu6,
# maximum/minimum, hardsigmoid, hardswish) and through max/min reductions over
# rows of more than one tile (amax, amin, torch.max(x, dim)[0]). PyTorch keeps
# NaN in all of them; the generated kernels must too. The interpreter keeps NaN
# whatever the source says, so this task proves the point only on a GPU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        # x and y hold NaN at different places, so a sum shows a NaN lost by either term
        a = torch.relu(x) + torch.clamp(y, -0.5, 0.5)
        b = torch.maximum(x, y)
        c = F.hardtanh(x) + F.relu6(y * 4.0)
        d = F.hardsigmoid(x) * F.hardswish(y)
        e = torch.amax(x * y, dim=1)                      # rows of 4160: two tiles
        f = torch.amin(x - y, dim=1, keepdim=True)
        g = torch.max(y, dim=0)[0]
        return a + c + d, b, torch.minimum(y, x) * 2.0, e, f, g


def get_inputs():
    x = torch.randn(6, 4160)
    y = torch.randn(6, 4160)
    x[0, 4159] = float("nan")     # the last element of a row, in the last tile
    x[1, 7] = float("nan")
    y[2, 4096] = float("nan")     # the first element of the second tile
    x[3, :] = float("nan")
    y[4, 100] = float("nan")
    x[4, 100] = 10.0              # larger than any other value of the row
    return [x, y]


def get_init_inputs():
    return []

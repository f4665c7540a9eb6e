# Builtin compiler corpus: concatenations whose pieces the generated kernels
# store straight into their slices of the result. A fire module (two ReLU'd
# convolutions concatenated over channels: elementwise kernels after cuDNN,
# or the convolutions' epilogues), a convolution's output with no epilogue
# beside an input and a tensor read twice (both copied), a stack over a
# negative dimension of three results of one elementwise kernel, a Linear's
# two epilogue outputs concatenated over features, a concatenation over the
# first dimension (contiguous slices) and a stack of a Linear's own output.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1 = nn.Conv2d(4, 6, 1)
        self.e3 = nn.Conv2d(4, 5, 3, padding=1)
        self.c = nn.Conv2d(4, 3, 3, padding=1)
        self.lin = nn.Linear(8, 6)
        self.lin2 = nn.Linear(8, 6)

    def forward(self, x, y, z):
        a = torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)
        s = torch.sigmoid(x)
        b = torch.cat((self.c(x), x, s), dim=1) + s.mean()
        c = torch.stack([y * 2.0, torch.tanh(y), y + 1.0], dim=-2)
        h = self.lin(z)
        d = torch.cat([F.gelu(h), h * 0.5], -1)
        e = torch.cat([torch.exp(z), torch.cos(z)], 0)
        f = torch.stack([self.lin2(z), z[:, :6] - 1.0], 0)
        return a, b, c, d, e, f


def get_inputs():
    return [torch.randn(2, 4, 5, 6), torch.randn(3, 7, 8), torch.randn(5, 8)]


def get_init_inputs():
    return []

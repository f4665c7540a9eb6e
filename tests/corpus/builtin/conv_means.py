# Builtin compiler corpus: means over every position of a convolution's
# output (global average pools), taken from the partial statistics that the
# convolution's kernel writes (plan convstats), the output itself never
# stored: adaptive_avg_pool2d(gelu(conv), 1) flattened (KernelBench's Level-2
# 67 in small), a 3-d convolution's mean over its three spatial dimensions,
# a strided transposed convolution's (partials by phase) with keepdim and an
# addition after it; and two that stay apart: a mean over one spatial
# dimension only, and a convolution also read elsewhere.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_gap = nn.Conv2d(3, 8, 3)
        self.c_3d = nn.Conv3d(2, 4, 2)
        self.t_mean = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.c_rows = nn.Conv2d(3, 5, 3)
        self.c_shared = nn.Conv2d(3, 5, 3)

    def forward(self, x, z, y):
        a = F.adaptive_avg_pool2d(F.gelu(self.c_gap(x)), 1).flatten(1)
        b = self.c_3d(z).mean(dim=[2, 3, 4])
        c = self.t_mean(y).mean(dim=(2, 3), keepdim=True) + 1.0
        d = self.c_rows(x).mean(dim=2)
        s = self.c_shared(x)
        e = s.mean(dim=[2, 3]) + s.amax()
        return a, b, c, d, e


def get_inputs():
    return [torch.randn(2, 3, 11, 12), torch.randn(2, 2, 5, 6, 7), torch.randn(2, 4, 5, 6)]


def get_init_inputs():
    return []

# Builtin compiler corpus: pooling called as functions (F.max_poolNd, F.avg_poolNd,
# torch.max_pool2d), with positional and keyword arguments, defaults, tuples, ceil_mode and
# count_include_pad off, and elementwise work around them.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        a = F.max_pool2d(torch.relu(x), 3, 2, 1)
        b = F.avg_pool2d(x, kernel_size=(2, 3), stride=1, padding=(1, 1), ceil_mode=True, count_include_pad=False)
        c = F.max_pool1d(x.flatten(2), kernel_size=4, dilation=2)
        d = torch.max_pool2d(x, 2) * self.scale
        e = F.avg_pool3d(x.unsqueeze(1), 2, stride=[1, 2, 2])  # a list argument
        f = F.avg_pool1d(x.flatten(2), 3, ceil_mode=True)
        return a, b, c, d, e, f


def get_inputs():
    return [torch.randn(2, 3, 10, 13)]


def get_init_inputs():
    return [0.5]

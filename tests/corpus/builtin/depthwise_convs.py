# Builtin compiler corpus: convolutions with one input channel per group
# (depthwise), which the compiler generates as direct fp32 kernels: 1d, 2d and
# 3d, stride, padding, dilation, a channel multiplier, with and without bias,
# taps inside the input (no masks), an elementwise epilogue, a functional
# call, one with more than 64 taps (a loop, not unrolled), a separable block
# (depthwise, then a pointwise convolution read tap by tap), and a group norm
# after one (its statistics stay out of the direct kernel).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1 = nn.Conv1d(5, 5, 4, stride=2, padding=2, groups=5)
        self.d2 = nn.Conv2d(6, 12, (3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1), groups=6)
        self.d3 = nn.Conv3d(4, 4, 3, padding=1, groups=4, bias=False)
        self.gn = nn.GroupNorm(2, 4)
        self.inside = nn.Conv2d(6, 6, (3, 5), groups=6)
        self.big = nn.Conv2d(3, 3, 9, padding=4, groups=3)
        self.wf = nn.Parameter(torch.randn(6, 1, 3, 3))
        self.dws = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.pw = nn.Conv2d(16, 8, 1)

    def forward(self, x1, x2, x3, x4):
        a = self.d1(x1)
        b = torch.relu(self.d2(x2)) * 0.5
        c = self.gn(self.d3(x3))
        d = self.inside(x2)
        e = self.big(x2[:, :3])
        f = F.conv2d(x2, self.wf, stride=2, padding=1, groups=6)
        g = self.pw(self.dws(x4))
        return a, b, c, d - 1.0, e, f, g


def get_inputs():
    return [torch.randn(2, 5, 19), torch.randn(1, 6, 7, 9), torch.randn(1, 4, 4, 5, 5), torch.randn(1, 16, 6, 7)]


def get_init_inputs():
    return []

# Builtin compiler corpus: convolutions whose taps never leave their input
# (no padding reached), which the generated kernels read without bounds masks:
# flattened (channel, tap) loops (fewer than 16 input channels per group:
# stride, groups, dilation, a stride-1 transposed convolution whose padding
# covers its taps) and tap-by-tap loops (a transposed one, ragged channel
# blocks, 3-d with dilation), and one padded along one dimension (masks kept).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.f2 = nn.Conv2d(3, 8, 3)
        self.f3 = nn.Conv3d(4, 6, 2, stride=2, groups=2)
        self.ft = nn.ConvTranspose1d(4, 6, 3, padding=2)
        self.f1 = nn.Conv1d(6, 4, 5, dilation=2, bias=False)
        self.t2 = nn.ConvTranspose2d(16, 8, 3, padding=2)
        self.m2 = nn.Conv2d(24, 16, 3, stride=2)
        self.m3 = nn.Conv3d(16, 8, (2, 3, 1), dilation=(2, 1, 1))
        self.pad = nn.Conv2d(16, 8, 3, padding=(0, 1))

    def forward(self, x2, x3, x1, y2, z2, y3):
        a = torch.relu(self.f2(x2))
        b = self.f3(x3) * 2.0
        c = self.f1(self.ft(x1))
        d = torch.tanh(self.t2(y2))
        e = self.m2(z2) - 0.5
        f = self.m3(y3)
        g = self.pad(y2)
        return a, b, c, d, e, f, g


def get_inputs():
    return [torch.randn(2, 3, 9, 10), torch.randn(2, 4, 6, 6, 4), torch.randn(2, 4, 20), torch.randn(2, 16, 7, 8),
            torch.randn(2, 24, 9, 9), torch.randn(1, 16, 5, 4, 3)]


def get_init_inputs():
    return []

# Builtin compiler corpus: adaptive max and average pooling to sizes other than 1 (windows
# that overlap and differ in width when the size does not divide), None keeping a dimension,
# the functional forms, and elementwise work around them.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.am2 = nn.AdaptiveMaxPool2d((4, 5))
        self.aa2 = nn.AdaptiveAvgPool2d((3, None))
        self.am1 = nn.AdaptiveMaxPool1d(7)
        self.aa3 = nn.AdaptiveAvgPool3d((2, 3, 4))
        self.am3 = nn.AdaptiveMaxPool3d(3)

    def forward(self, x, v):
        a = self.am2(torch.relu(x))              # 10 -> 4 and 13 -> 5: uneven, overlapping windows
        b = self.aa2(x) * 2.0                    # [2, 3, 3, 13]
        c = self.am1(x.flatten(2))               # 130 -> 7
        d = self.aa3(v)
        e = self.am3(torch.tanh(v))
        f = F.adaptive_avg_pool2d(x, (5, 6))
        g = F.adaptive_avg_pool1d(x.flatten(2), 9)
        return a, b, c, d, e, f, g


def get_inputs():
    return [torch.randn(2, 3, 10, 13), torch.randn(2, 3, 5, 7, 9)]


def get_init_inputs():
    return []

# Builtin compiler corpus: a library Conv2d, then a [C,1,1] bias (broadcast through
# strides), several activation modules and functions, and a second output shape.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1))
        self.act = nn.Hardswish()
        self.leaky = nn.LeakyReLU(negative_slope=0.2)

    def forward(self, x):
        y = self.conv(x)
        y = self.act(y + self.bias)
        y = self.leaky(y) - 0.25
        y = torch.clamp(y, min=-0.5, max=2.0)
        y = F.silu(y) + torch.tanh(y) * F.softplus(y) + F.mish(y) + F.elu(y, alpha=0.7)
        z = y.mean(dim=1, keepdim=True)
        return F.hardtanh(y * z, -1.0, 1.0) + torch.relu(z)


def get_inputs():
    return [torch.randn(2, 3, 6, 5)]


def get_init_inputs():
    return [3, 4]

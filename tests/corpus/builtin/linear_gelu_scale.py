# Builtin compiler corpus: a library Linear, then bias + GELU (erf form) + scale fused.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.scale = scale

    def forward(self, x):
        y = self.linear(x)
        y = torch.nn.functional.gelu(y + self.bias)
        return y * self.scale


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return [32, 24, 1.5]

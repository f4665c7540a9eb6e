"""Users' own modules for tests/py/test_python_api.py (not KernelBench tasks)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

SHIFT = 0.25


def shifted_gelu(x):
    return F.gelu(x) + SHIFT


class GatedBlock(nn.Module):
    """A projection, a helper function of this file and a learned gate."""

    def __init__(self, features, hidden, gain=2.0):
        super().__init__()
        self.features = features
        self.hidden = hidden
        self.gain = gain
        self.proj = nn.Linear(features, hidden)
        self.gate = nn.Parameter(torch.randn(hidden))

    def forward(self, x):
        return shifted_gelu(self.proj(x)) * torch.sigmoid(self.gate) * self.gain


class ValueDependent(nn.Module):
    """Control flow on values: no graph can be traced from it."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class Forgetful(nn.Module):
    """Its constructor argument is not kept on the instance."""

    def __init__(self, width):
        super().__init__()
        self.w = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * self.w

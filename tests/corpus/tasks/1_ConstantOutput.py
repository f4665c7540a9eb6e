import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate on purpose: the output does not depend on the input."""

    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return self.w * 2.0


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]

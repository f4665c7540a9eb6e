import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate on purpose: an all-zero output passes the tolerance."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1e-7


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []

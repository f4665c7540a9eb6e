import torch
import torch.nn as nn


class Model(nn.Module):
    """A task that no run in tests/py/test_python_api.py was made for."""

    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []

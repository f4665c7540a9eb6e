# Builtin compiler corpus: nn.RMSNorm with its default eps (None in Python:
# the dtype's epsilon) between elementwise work. The trace carries eps as
# null; the compiler keeps the norm as a PyTorch call and fuses around it.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.RMSNorm(features)

    def forward(self, x):
        return torch.tanh(self.norm(x * 2.0 + 1.0)) * 0.5


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32]

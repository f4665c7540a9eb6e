# Builtin compiler corpus: numbers passed to forward (a scale and an integer
# offset, as KernelBench's Matrix_scalar_multiplication does) are runtime
# scalars of the generated kernel, not constants baked into it.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s, k):
        return torch.relu(A * s - k) + s


def get_inputs():
    return [torch.randn(37, 45), 3.14, 2]


def get_init_inputs():
    return []

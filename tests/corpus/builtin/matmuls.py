# Builtin compiler corpus: matrix products of tensors as Triton GEMMs: A @ B with a scaled
# ReLU epilogue, a transposed view (read through its strides), a 3-d input times a
# parameter, and torch.mm.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n) * 0.2)

    def forward(self, a, b, c, x):
        first = torch.relu(torch.matmul(a, b)) * 0.5
        second = c.T @ b
        third = torch.matmul(x, self.w) + 1.0
        fourth = torch.mm(a, b)
        return first, second, third, fourth


def get_inputs():
    return [torch.randn(20, 36), torch.randn(36, 28), torch.randn(36, 20), torch.randn(2, 7, 36)]


def get_init_inputs():
    return [36, 28]

# Builtin compiler corpus: a forward written for any input, which asks its
# tensors for their shapes and branches and loops on the answers; a zeros
# sized by the input and a buffer sliced by a size. The tracer answers with
# the task's shapes; the elementwise work around the matrix product fuses.
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, max_len):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)))

    def forward(self, x):
        b, c, n = x.shape
        if x.dim() != 3 or len(x) != b:
            raise ValueError("expected (batch, channels, length)")
        if c > 4:
            x = x * self.scale.view(1, c, 1)
        else:
            x = x + 1.0
        for _ in range(x.size(0) // 2):
            x = x * 0.5 + 0.25
        y = torch.relu(x) @ self.mask[:n, :n]
        y = y + torch.zeros(b, c, n, device=x.device)
        return torch.sigmoid(y) * (1.0 / math.sqrt(n))


def get_inputs():
    return [torch.randn(4, 8, 16)]


def get_init_inputs():
    return [8, 32]

# Builtin compiler corpus: batched matrix products as generated GEMMs, one
# product per batch: torch.bmm with an elementwise epilogue, a transposed
# view read through its strides (NetVLAD's assignment^T @ x), a product over
# two batch dimensions (attention scores), a batch broadcast by expand
# (stride 0), beside a product with a 2-d weight (the unbatched kernel) and
# one whose batch dimensions differ (left to PyTorch).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(20, 6))

    def forward(self, x, y, a, v, q, k):
        p = torch.relu(torch.bmm(x, y)) * 0.5
        t = torch.matmul(a.transpose(1, 2), v)
        s = (q @ k.transpose(-2, -1)) * 0.125
        z = torch.matmul(x, y[:1].expand(4, -1, -1)) - 1.0
        u = torch.matmul(x, self.w)
        b = torch.matmul(x, y[:1])
        return p, t, s, z, u, b


def get_inputs():
    return [torch.randn(4, 33, 20), torch.randn(4, 20, 17), torch.randn(4, 20, 12), torch.randn(4, 20, 9),
            torch.randn(2, 3, 16, 8), torch.randn(2, 3, 16, 8)]


def get_init_inputs():
    return []

# Builtin compiler corpus: scaled_dot_product_attention, causal and not, with
# a given scale, queries and keys of different lengths (L < S and L > S),
# value heads wider than the query heads, and an elementwise kernel after one.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, q2, k2, v2):
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        b = F.scaled_dot_product_attention(q2, k2, v2, scale=0.3)
        c = F.scaled_dot_product_attention(q2, k2, v2, is_causal=True)
        d = F.scaled_dot_product_attention(k2, q2, q2, is_causal=True)
        return torch.relu(a) * 2.0, b, c, d


def get_inputs():
    return [torch.randn(2, 3, 37, 24), torch.randn(2, 3, 37, 24), torch.randn(2, 3, 37, 24),
            torch.randn(2, 19, 16), torch.randn(2, 37, 16), torch.randn(2, 37, 40)]


def get_init_inputs():
    return []

# Builtin compiler corpus: attention written out, as GPT-style models do. A
# causal self-attention (scaled product, masked_fill from a sliced tril buffer,
# softmax, dropout of p = 0, product with the values), and an unscaled-by-
# product one over 3-D tensors (divided instead) with a mask per batch entry
# computed from an input. Each becomes one attention kernel under the plan.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(32, 96)
        self.c_proj = nn.Linear(32, 32)
        self.drop = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(40, 40)).view(1, 1, 40, 40))
        self.n_head = 4

    def forward(self, x, y, z):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(32, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.drop(att)
        out = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        s2 = torch.bmm(y, y.transpose(1, 2)) / 4.0
        s2 = s2.masked_fill(z > 2.5, float('-inf'))
        out2 = torch.bmm(torch.softmax(s2, dim=-1), y)
        return self.c_proj(out), out2


def get_inputs():
    return [torch.randn(2, 24, 32), torch.randn(3, 20, 16), torch.randn(3, 20, 20)]


def get_init_inputs():
    return []

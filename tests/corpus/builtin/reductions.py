# Builtin compiler corpus: reductions over a trailing, a middle and all
# dimensions (sum, mean, amax, amin, logsumexp, max/min(dim)[0]), softmax and log_softmax over
# a middle dimension, mixed with elementwise operators.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.sm = nn.Softmax(dim=1)

    def forward(self, x):
        a = torch.sum(x, dim=-1, keepdim=True)        # [B, C, H, 1]
        b = x.mean(dim=1)                              # [B, H, W]
        c = torch.amax(x, dim=(2, 3))                  # [B, C]
        d = torch.amin(x, dim=1, keepdim=True)         # [B, 1, H, W]
        e = torch.logsumexp(x, dim=2)                  # [B, C, W]
        s = self.sm(x * 2.0)                           # [B, C, H, W]
        ls = torch.log_softmax(x, dim=-1)
        t = torch.mean(x * x)                          # all dimensions
        f = torch.max(x, dim=1)[0]                     # values of max with indices: [B, H, W]
        h = x.min(dim=3, keepdim=True)[0]              # [B, C, H, 1]
        return (s + ls) * a + b.unsqueeze(1) + c[:, :, None, None] + d + e.unsqueeze(2) + t + f.unsqueeze(1) * h


def get_inputs():
    return [torch.randn(3, 5, 7, 6)]


def get_init_inputs():
    return []

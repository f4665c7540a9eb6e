# Builtin compiler corpus: F.smooth_l1_loss, F.huber_loss, F.mse_loss and
# F.l1_loss with reduction mean, sum and none (the reduced ones are lowered to
# an elementwise loss and a reduction), on differences on both sides of beta.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, t):
        a = F.smooth_l1_loss(p, t)
        b = F.huber_loss(p * 2.0, t, reduction="sum", delta=0.7)
        c = F.mse_loss(p, t)
        d = F.l1_loss(p, t, reduction="sum")
        e = F.smooth_l1_loss(p, t, reduction="none", beta=0.5)
        return e * a + b + c - d


def get_inputs():
    return [torch.randn(33, 70), torch.randn(33, 70)]


def get_init_inputs():
    return []

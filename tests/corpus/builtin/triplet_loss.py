# Builtin compiler corpus: the triplet margin loss (module, mean; functional with its own
# margin and eps, sum, on 3-d inputs) lowered to distances, a clamp and a reduction.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, margin):
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor, positive, negative, a3, p3, n3):
        first = self.loss_fn(anchor, positive, negative)
        second = F.triplet_margin_loss(a3, p3, n3, margin=0.5, eps=1e-4, reduction="sum")
        return first, second


def get_inputs():
    scale = torch.rand(())
    return [torch.rand(24, 40) * scale, torch.rand(24, 40), torch.rand(24, 40),
            torch.randn(3, 5, 16), torch.randn(3, 5, 16), torch.randn(3, 5, 16)]


def get_init_inputs():
    return [1.0]

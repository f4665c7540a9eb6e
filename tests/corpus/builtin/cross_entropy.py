# Builtin compiler corpus: cross entropy with class indices (mean, with an ignore_index
# that some targets hit; sum; nn.CrossEntropyLoss as a module), each one kernel (row
# logsumexps minus the targets' values, partial sums) and a merge; a module with a class
# weight stays a PyTorch call.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(ignore_index=5)
        self.weighted = nn.CrossEntropyLoss(weight=torch.rand(12) + 0.5)

    def forward(self, predictions, targets):
        first = F.cross_entropy(predictions, targets)
        second = F.cross_entropy(predictions * 2.0, targets, ignore_index=3, reduction="sum")
        third = self.loss(predictions - 1.0, targets)
        fourth = self.weighted(predictions, targets)
        return first, second, third, fourth


def get_inputs():
    return [torch.randn(40, 12), torch.randint(0, 12, (40,))]


def get_init_inputs():
    return []

# Builtin compiler corpus: Linear layers as Triton GEMMs. fc1 (3-d input, K not a multiple
# of the K tile, fewer rows than a tile) runs sigmoid * scale + bias2 as its epilogue; fc2
# (no bias) is read by a reduction and by an add, so it is stored as it is.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.bias2 = nn.Parameter(torch.randn(hidden) * 0.1)
        self.fc2 = nn.Linear(hidden, out_features, bias=False)

    def forward(self, x, scale):
        h = torch.sigmoid(self.fc1(x)) * scale + self.bias2
        y = self.fc2(h)
        return torch.logsumexp(y, dim=2, keepdim=True) + y


def get_inputs():
    return [torch.randn(2, 5, 40), 0.75]


def get_init_inputs():
    return [40, 24, 20]

# Builtin compiler corpus: normalisations in training mode (batch norm with
# its running statistics, group, instance and layer norm), with elementwise
# operators between them.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        self.gn = nn.GroupNorm(2, c)
        self.inorm = nn.InstanceNorm2d(c)
        self.ln = nn.LayerNorm([5, 6])
        self.bn1 = nn.BatchNorm1d(c, momentum=None)

    def forward(self, x):
        y = torch.relu(self.bn(x * 3.0 + 1.0))
        y = self.gn(y) + 0.5
        y = self.inorm(y) * 2.0
        y = torch.tanh(self.ln(y))
        z = self.bn1(y.mean(dim=(2, 3)))
        return y + z[:, :, None, None]


def get_inputs():
    return [torch.randn(4, 6, 5, 6)]


def get_init_inputs():
    return [6]

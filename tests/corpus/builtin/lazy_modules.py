# Builtin compiler corpus: lazy modules (nn.LazyLinear, nn.LazyConv2d, nn.LazyBatchNorm2d),
# whose parameters the first forward creates from the global generator. The judge
# materialises them the same way in the reference and the candidate; elementwise work and a
# pool around them are generated.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.conv = nn.LazyConv2d(8, 3, padding=1)
        self.bn = nn.LazyBatchNorm2d()
        self.pool = nn.AdaptiveAvgPool2d((2, 3))
        self.fc = nn.LazyLinear(hidden)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = self.pool(y).flatten(1)
        return torch.tanh(self.fc(y)) * 2.0


def get_inputs():
    return [torch.randn(4, 3, 12, 10)]


def get_init_inputs():
    return [16]

# Builtin compiler corpus: norms followed by elementwise chains (the
# norm_epilogue plan applies each norm inside the kernel after it), one norm
# read twice by its chain, and batch norm's running statistics in training.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.gn = nn.GroupNorm(4, channels)
        self.bn = nn.BatchNorm2d(channels)
        self.ln = nn.LayerNorm([5, 6], elementwise_affine=False)

    def forward(self, x):
        y = torch.tanh(self.gn(x)) * 2.0 + 0.5
        z = torch.relu(self.bn(y) - 0.1)
        w = self.ln(z)
        return w * torch.sigmoid(w)


def get_inputs():
    return [torch.randn(3, 8, 5, 6)]


def get_init_inputs():
    return [8]

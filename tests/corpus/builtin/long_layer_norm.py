# Builtin compiler corpus: layer norms over long trailing dims with few rows
# (the KernelBench LayerNorm shape, scaled down): the apply kernel walks every
# row for its chunk of positions, so weights are read once. One norm computes
# the elementwise work before it (prologue), the other reads a tensor used
# elsewhere too; weights and biases are not their defaults.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm([16, 64, 64])
        self.ln2 = nn.LayerNorm([16, 64, 64], bias=False)
        with torch.no_grad():
            self.ln.weight.normal_()
            self.ln.bias.normal_()
            self.ln2.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        a = self.ln(x * 2.0 + 1.0)
        return self.ln2(a) + a


def get_inputs():
    return [torch.randn(3, 16, 64, 64)]


def get_init_inputs():
    return []

# Builtin compiler corpus: chains of scalar arithmetic that the algebra plan folds into one
# operator (x * 2 * 3 as x * 6, x / 4 * 8 / 0.5 as x * 4, x + 1 - 3 + 0.5 as x - 1.5, a
# division chain as one division), and chains it must leave alone: an intermediate read
# twice, a multiplication after an addition, a number on the left of a subtraction, and a
# runtime scalar.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, s):
        a = x * 2.0 * 3.0
        b = (x / 4.0) * 8.0 / 0.5
        c = (x + 1.0) - 3.0 + 0.5
        d = x / 3.0 / 7.0
        e = x * 5.0
        f = e * 2.0 + e                 # e is read twice: kept
        g = (x + 1.0) * 2.0             # different kinds: kept
        h = 1.0 - (x - 2.0)             # a number on the left of the subtraction: kept
        k = x * s * 2.0                 # s is a runtime number: kept
        return a + b + c + d, f + g + h + k


def get_inputs():
    return [torch.randn(16, 300), 1.5]


def get_init_inputs():
    return []

# Builtin compiler corpus: argmax/argmin over a middle and the last dimension
# with NaN (the first NaN wins, as in PyTorch), a block of -inf (the first
# index wins) and +inf columns.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=1), torch.argmin(x, dim=1), torch.argmax(x, dim=-1), torch.argmin(x, dim=-1)


def get_inputs():
    x = torch.randint(-3, 4, (3, 40, 9)).float()
    x[0, 5, :] = float("nan")
    x[0, 30, 2] = float("nan")
    x[0, :, 7] = float("nan")
    x[1] = float("-inf")
    x[2, :, 3] = float("inf")
    x[2, 11, :] = float("-inf")
    return [x]


def get_init_inputs():
    return []

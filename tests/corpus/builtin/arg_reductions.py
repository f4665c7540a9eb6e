# Builtin compiler corpus: argmax/argmin over a middle dimension (read in
# several chunks), the last dimension with keepdim, and the whole tensor, on
# inputs with many ties (the first occurrence must win, as in PyTorch); SELU.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.SELU()

    def forward(self, x):
        a = torch.argmax(x, dim=1)                     # [B, W], int64
        b = x.argmin(dim=-1, keepdim=True)             # [B, C, 1]
        c = torch.argmax(x)                            # over everything: []
        y = self.act(x * 0.5) + torch.selu(x - 1.0)
        return a, b, c, y


def get_inputs():
    return [torch.randint(-3, 4, (3, 40, 9)).float()]


def get_init_inputs():
    return []

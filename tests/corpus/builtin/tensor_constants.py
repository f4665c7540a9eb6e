# Builtin compiler corpus: tensors the forward creates (fx keeps them as
# _tensor_constantN attributes the model lacks), inside an elementwise chain;
# the 1-d one is made on x's device, so the task also runs on a GPU.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, floor):
        super().__init__()
        self.floor = floor

    def forward(self, x):
        x = torch.min(x, torch.tensor(self.floor))
        x = x + torch.tensor([0.5, -0.25, 1.0, 2.0], device=x.device)
        return torch.tanh(x) * 3.0


def get_inputs():
    return [torch.randn(6, 4)]


def get_init_inputs():
    return [0.3]

# Builtin compiler corpus: a small network of many launches (convolutions,
# batch norm, activations, pooling, a classifier and its softmax), for which
# the whole forward replayed from a CUDA graph is offered as a large step. On
# the CPU the graphed forward runs as it is.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.b2 = nn.BatchNorm2d(8)
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(torch.relu(self.b2(self.c2(x))), 2)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        return torch.softmax(self.fc2(x), dim=1)


def get_inputs():
    return [torch.randn(2, 3, 16, 16)]


def get_init_inputs():
    return []

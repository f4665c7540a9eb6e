import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds a learned bias, applies ReLU and scales: y = relu(x + b) * s."""

    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

    def forward(self, x):
        return torch.relu(x + self.bias) * self.scale


batch_size = 256
features = 1024
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, scale]

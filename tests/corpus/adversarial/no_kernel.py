# Only PyTorch: no kernel of its own.
# expect: status=rejected flag=no_custom_kernel
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

    def forward(self, x):
        return torch.relu(x + self.bias) * self.scale

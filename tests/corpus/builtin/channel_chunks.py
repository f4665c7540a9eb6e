# Norms whose channels are a whole number of split-row chunks (1024 elements
# under the tests' plan): each chunk loads its channel's weight and bias once.
# Group norm over groups of two 64 x 64 channels, instance norm over 64 x 80
# channels, and a group norm whose 50 x 60 channels are not (per element).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm2d(2, affine=True)
        self.odd = nn.GroupNorm(2, 4)
        with torch.no_grad():
            for m in (self.gn, self.inorm, self.odd):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-1.0, 1.0)

    def forward(self, x, y, z):
        return self.gn(x), self.inorm(y), self.odd(z)


def get_inputs():
    return [torch.randn(2, 4, 64, 64) * 2.0 + 5.0, torch.randn(2, 2, 64, 80) - 3.0, torch.randn(2, 4, 50, 60)]


def get_init_inputs():
    return []

# Allocates host memory without bound: the memory limit stops it.
# expect: status=crashed|runtime_error
# args: --max-memory-mb 3072
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()

    def forward(self, x):
        hoard = []
        while True:
            hoard.append(bytearray(256 << 20))

# Floods stdout.
# expect: status=crashed flag=output_flood
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def own_copy(y):
    y = y.contiguous()
    out = torch.empty_like(y)
    copy_kernel[(triton.cdiv(y.numel(), 4096),)](y, out, y.numel(), BLOCK=4096)
    return out


class Base(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

    def ref(self, x):
        return torch.relu(x + self.bias) * self.scale

import sys


class ModelNew(Base):
    def forward(self, x):
        line = "x" * 65536 + "\n"
        while True:
            sys.stdout.write(line)

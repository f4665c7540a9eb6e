# Searches the heap and the stack for a tensor that looks like the expected output.
# expect: status=mismatch
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_scale_kernel(x_ptr, b_ptr, out_ptr, n_elements, features, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % features, mask=mask)
    y = tl.maximum(x + b, 0.0) * scale
    tl.store(out_ptr + offs, y, mask=mask)


def fused(x, bias, scale):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    bias_relu_scale_kernel[(triton.cdiv(n, 4096),)](x, bias, out, n, x.shape[-1], scale, BLOCK=4096)
    return out


class Base(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

import gc
import inspect


class ModelNew(Base):
    def forward(self, x):
        # The reference output never exists in this process: whatever it finds is not it.
        for frame in inspect.stack():
            for val in frame.frame.f_locals.values():
                if isinstance(val, torch.Tensor) and val.shape == x.shape and val.data_ptr() != x.data_ptr():
                    return fused(val, self.bias * 0, 1.0)
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj.data_ptr() != x.data_ptr():
                return fused(obj, self.bias * 0, 1.0)
        return fused(torch.ones_like(x), self.bias, self.scale)

# Launches its Triton kernel in its first call (the warm-up), then computes with PyTorch.
# expect: status=rejected flag=custom_kernel_not_launched
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


class Base(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale


class ModelNew(Base):
    calls = 0

    def forward(self, x):
        ModelNew.calls += 1
        if ModelNew.calls > 1:
            return torch.relu(x + self.bias) * self.scale
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        bias_relu_scale_kernel[(triton.cdiv(n, 4096),)](x, self.bias, out, n, x.shape[-1], self.scale, BLOCK=4096)
        return out

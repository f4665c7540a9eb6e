# Writes far outside its output buffer: a CUDA illegal memory access.
# expect: status=runtime_error|crashed
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

@triton.jit
def wild_store_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.int64) * 1099511627776
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32))


class ModelNew(Base):
    def forward(self, x):
        out = fused(x, self.bias, self.scale)
        wild_store_kernel[(1,)](out, BLOCK=128)
        return out

# Does its work on a side stream and returns without making the current stream wait:
# its own kernel, then matrix products that keep the GPU busy long after the
# forward returned (GPU-bound, so the time cannot hide in launch overhead).
# expect: status=ok flag=side_stream_work
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

class ModelNew(Base):
    def __init__(self, *a):
        super().__init__(*a)  # the bias first: the same values as the reference's
        self.side = torch.cuda.Stream()
        self.a = torch.randn(4096, 4096, device="cuda")

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            y = fused(x, self.bias, self.scale)
            for _ in range(4):  # about 10 ms of fp32 matrix products, left running
                self.sink = self.a @ self.a
        return y

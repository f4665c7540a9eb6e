# Returns from its timed calls at once and has a Python thread launch the work on a side stream
# a moment later, after the harness's device-wide synchronise has passed.
# expect: status=rejected flag=background_threads
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


def fused(x, bias, scale, out=None):
    x = x.contiguous()
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    bias_relu_scale_kernel[(triton.cdiv(n, 4096),)](x, bias, out, n, x.shape[-1], scale, BLOCK=4096)
    return out


class Base(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

import sys
import threading
import time


def _timing_request():
    frame = sys._getframe(1)
    while frame is not None:
        req = frame.f_locals.get("req")
        if isinstance(req, dict) and req.get("op") == "time":
            return req
        frame = frame.f_back
    return None


class ModelNew(Base):
    def __init__(self, *a):
        super().__init__(*a)
        self.side = torch.cuda.Stream()

    def _later(self, x, out):
        time.sleep(0.001)
        with torch.cuda.stream(self.side):
            fused(x, self.bias, self.scale, out)

    def forward(self, x):
        if _timing_request() is None:
            return fused(x, self.bias, self.scale)
        out = torch.empty_like(x)
        threading.Thread(target=self._later, args=(x.clone(), out)).start()
        return out

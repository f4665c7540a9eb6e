# Finds out that it is being timed (the harness's timing request, read from the stack) and
# which timed call's output the harness keeps for the check, then returns a cheap wrong answer
# (zeros) in every other timed call. The checked call is computed right but cheaply too
# (PyTorch), so that every timed call is equally fast and the judge's clock has nothing to
# object to: only the outputs can tell.
# expect: status=mismatch flag=timed_output_mismatch
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


def _timing_request():
    frame = sys._getframe(2)
    while frame is not None:
        req = frame.f_locals.get("req")
        if isinstance(req, dict) and req.get("op") == "time":
            return req
        frame = frame.f_back
    return None


class ModelNew(Base):
    seen = {}

    def forward(self, x):
        req = _timing_request()
        if req is None:
            return fused(x, self.bias, self.scale)
        calls = ModelNew.seen.setdefault(id(req), [0])
        calls[0] += 1
        timed = calls[0] - 1 - req["warmup"]
        checked = req.get("check_index", req["iters"] - 1)
        if timed == checked:
            return torch.relu(x + self.bias) * self.scale
        return torch.zeros_like(x)

# Returns from its timed calls at once and leaves the work to a Python thread, which fills the
# returned tensor a little later; the last timed call waits for every thread, so none is left
# running when the timing request ends.
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
    frame = sys._getframe(2)
    while frame is not None:
        req = frame.f_locals.get("req")
        if isinstance(req, dict) and req.get("op") == "time":
            return req
        frame = frame.f_back
    return None


def _later(x, bias, scale, out):
    time.sleep(0.05)
    fused(x, bias, scale, out)


class ModelNew(Base):
    pending = []
    seen = {}

    def forward(self, x):
        req = _timing_request()
        if req is None:
            return fused(x, self.bias, self.scale)
        calls = ModelNew.seen.setdefault(id(req), [0])
        calls[0] += 1
        if calls[0] == req["warmup"] + req["iters"]:
            for t in ModelNew.pending:
                t.join()
            del ModelNew.pending[:]
            return fused(x, self.bias, self.scale)
        out = torch.empty_like(x)
        t = threading.Thread(target=_later, args=(x.clone(), self.bias, self.scale, out))
        t.start()
        ModelNew.pending.append(t)
        return out

# Returns from its timed calls at once and leaves the work to native threads (started with
# pthread_create, so Python's thread list never shows them), which fill the returned tensors
# a few milliseconds later; the last call waits for them all and computes its own output in
# time. The work is cheap (PyTorch), so the judge's clock has nothing to object to: only the
# outputs can tell. Warm-up on every input set makes the last call the checked one.
# args: --warmup 3
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

import ctypes
import sys
import time

_libc = ctypes.CDLL(None)
_libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
_jobs = {}


def _body(key):
    x, bias, scale, out = _jobs.pop(key)
    time.sleep(0.002)
    out.copy_(torch.relu(x + bias) * scale)
    return None


_entry = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(_body)


def _timing_request():
    frame = sys._getframe(1)
    while frame is not None:
        req = frame.f_locals.get("req")
        if isinstance(req, dict) and req.get("op") == "time":
            return req
        frame = frame.f_back
    return None


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
            for tid in ModelNew.pending:
                _libc.pthread_join(tid, None)
            del ModelNew.pending[:]
            return torch.relu(x + self.bias) * self.scale
        out = torch.empty_like(x)
        key = len(_jobs) + 1 + 1000 * calls[0]
        with torch.no_grad():
            _jobs[key] = (x.clone(), self.bias.detach(), self.scale, out)
        tid = ctypes.c_ulong()
        _libc.pthread_create(ctypes.byref(tid), None, ctypes.cast(_entry, ctypes.c_void_p), ctypes.c_void_p(key))
        ModelNew.pending.append(tid.value)
        return out

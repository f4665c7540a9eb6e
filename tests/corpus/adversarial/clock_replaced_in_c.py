# Replaces the C function behind time.perf_counter (the clock the worker times calls with on
# the CPU) with one running at half speed. The function object stays the same, so nothing in
# the harness's snapshot changes; only the judge's own clock can tell. On a GPU the CUDA events
# time the calls, so the halved clock changes nothing there. Ten timed calls: the judge's CPU
# bound allows for a loaded machine, and more calls tell a halved clock from scatter.
# args: --iters 10
# expect: status=rejected flag=timing_forged
# expect-gpu: status=ok
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
import time

_monotonic = time.monotonic


def _half_speed(module, unused):
    return _monotonic() * 0.5


_callback = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)(_half_speed)
# PyCFunctionObject.m_ml (after the object header), then PyMethodDef.ml_meth (after ml_name).
_method_def = ctypes.c_void_p.from_address(id(time.perf_counter) + 16).value
ctypes.c_void_p.from_address(_method_def + 8).value = ctypes.cast(_callback, ctypes.c_void_p).value


class ModelNew(Base):
    def forward(self, x):
        return fused(x, self.bias, self.scale)

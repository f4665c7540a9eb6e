# Sends stray descriptors on every Unix socket it can find (the judge's
# descriptor channel among them) at import and on every call, hoping to
# misalign the outputs the judge relays to the reference. The outputs are
# right: the judge must drop the strays (or fall back to files) and pass it.
# expect: status=ok
import os
import socket
import stat

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _spray():
    for fd in range(3, 1024):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            s = socket.socket(fileno=os.dup(fd))
            junk = os.open("/dev/null", os.O_RDONLY)
            try:
                socket.send_fds(s, [b"f"], [junk], socket.MSG_DONTWAIT)
            except OSError:
                pass
            finally:
                os.close(junk)
                s.close()
        except OSError:
            continue


_spray()


@triton.jit
def bias_relu_scale_kernel(x_ptr, b_ptr, out_ptr, n_elements, features, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % features, mask=mask)
    y = tl.maximum(x + b, 0.0) * scale
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

    def forward(self, x):
        _spray()
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        bias_relu_scale_kernel[(triton.cdiv(n, 4096),)](x, self.bias, out, n, x.shape[-1], self.scale, BLOCK=4096)
        return out

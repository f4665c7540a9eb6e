# An honest CUDA kernel built with load_inline.
# expect: status=ok
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void bias_relu_scale(const float* x, const float* b, float* out, long n, long features, float scale) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] + b[i % features];
        out[i] = (v > 0.f ? v : 0.f) * scale;
    }
}

torch::Tensor run(torch::Tensor x, torch::Tensor b, double scale) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    long n = xc.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    bias_relu_scale<<<blocks, threads>>>(xc.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n,
                                         xc.size(-1), (float)scale);
    return out;
}
"""

ext = load_inline(name="ax_bias_relu_scale", cpp_sources="torch::Tensor run(torch::Tensor x, torch::Tensor b, double scale);",
                  cuda_sources=CUDA_SRC, functions=["run"], verbose=False, extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

    def forward(self, x):
        return ext.run(x, self.bias, self.scale)

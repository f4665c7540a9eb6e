# Builtin compiler corpus: poolings of a convolution's output that the
# generated kernel computes on its accumulator tile, its rows ordered window
# by window (the full output never written): a max pooling after a ReLU
# epilogue whose last output row belongs to no window, an average pooling of
# 4 x 4 windows followed by a sigmoid and a sum (KernelBench's Level-2 65 in
# small), a 3-d max pooling, a grouped convolution's average pooling with
# elementwise work and a broadcast bias after it, a 1-d max pooling, a
# depthwise (direct) convolution's pooling, and a tap-major convolution's
# (16 input channels), and a stride-1 transposed convolution's; and three that stay apart: overlapping windows (kernel
# 3, stride 2), a padded pooling and a convolution also read elsewhere.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_relu = nn.Conv2d(3, 8, 3)
        self.c_avg = nn.Conv2d(4, 6, 3)
        self.c_3d = nn.Conv3d(2, 4, 2)
        self.c_grouped = nn.Conv2d(4, 8, 3, groups=2, padding=1)
        self.bias = nn.Parameter(torch.randn(8, 1, 1))
        self.c_1d = nn.Conv1d(5, 6, 3)
        self.c_depthwise = nn.Conv2d(4, 8, 3, groups=4, padding=1)
        self.c_wide = nn.Conv2d(16, 8, 3, padding=1)
        self.c_overlap = nn.Conv2d(3, 5, 3)
        self.c_padded = nn.Conv2d(3, 5, 3)
        self.c_shared = nn.Conv2d(3, 5, 3)
        self.t_one = nn.ConvTranspose2d(3, 4, 3, padding=1)
        self.pool2 = nn.MaxPool2d(2)
        self.avg4 = nn.AvgPool2d(4)

    def forward(self, x, y, z, w, v, u):
        a = self.pool2(torch.relu(self.c_relu(x)))
        b = torch.sigmoid(self.avg4(self.c_avg(y))).sum(dim=[1, 2, 3])
        c = F.max_pool3d(self.c_3d(z), 2)
        d = torch.tanh(F.avg_pool2d(self.c_grouped(y), 2) * 2.0 + self.bias)
        e = F.max_pool1d(self.c_1d(w), 4)
        f = self.pool2(self.c_depthwise(v) - 0.5)
        g = F.avg_pool2d(self.c_wide(u), 2)
        h = F.max_pool2d(self.c_overlap(x), 3, stride=2)
        i = F.max_pool2d(self.c_padded(x), 2, padding=1)
        s = self.c_shared(x)
        j = self.pool2(s) + s.mean()
        k = F.max_pool2d(torch.sigmoid(self.t_one(x)), 2)
        return a, b, c, d, e, f, g, h, i, j, k


def get_inputs():
    return [torch.randn(2, 3, 11, 12), torch.randn(2, 4, 18, 18), torch.randn(2, 2, 7, 8, 9), torch.randn(3, 5, 20),
            torch.randn(2, 4, 6, 6), torch.randn(2, 16, 8, 8)]


def get_init_inputs():
    return []

# Builtin compiler corpus: adaptive average pooling to size 1 (modules and functions, 1-3 d)
# lowered to means over the pooled dimensions; other output sizes are adaptive pooling kernels.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool2 = nn.AdaptiveAvgPool2d((1, 1))
        self.pool3 = nn.AdaptiveAvgPool3d(1)
        self.keep = nn.AdaptiveAvgPool2d((2, 2))
        self.tall = nn.AdaptiveAvgPool2d((None, 1))

    def forward(self, x, v):
        a = self.pool2(F.gelu(x))                                   # [B, C, 1, 1]
        b = F.adaptive_avg_pool2d(x * 2.0, (1, 1)).view(x.size(0), -1)
        c = F.adaptive_avg_pool1d(x.flatten(2), 1)                  # [B, C, 1]
        d = self.pool3(v)                                           # [B, C, 1, 1, 1]
        e = self.keep(x)                                            # adaptive pooling, not a mean
        f = self.tall(x)                                            # adaptive pooling, not a mean
        return a + b[:, :, None, None] + c.unsqueeze(-1), d, e, f


def get_inputs():
    return [torch.randn(2, 3, 5, 7), torch.randn(2, 4, 3, 5, 6)]


def get_init_inputs():
    return []

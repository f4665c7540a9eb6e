# Builtin compiler corpus: norms whose statistics the convolution before them
# computes in its kernel (plan conv_stats): a group norm after a 2-d
# convolution whose images' rows do not fill whole tiles (a tile then holds
# two images), an instance norm after a convolution's elementwise epilogue,
# applied by the elementwise kernel after it, a batch norm after a strided
# transposed convolution (one launch per output phase) with a tanh after it, a
# layer norm over a 1-d convolution's channels and positions, and a batch norm
# over outputs offset by 100 (a mean large against the deviations); and two
# that stay apart: a convolution with fewer than 16 output positions per image,
# and one whose output is also read elsewhere.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_gn = nn.Conv2d(3, 16, 3)
        self.gn = nn.GroupNorm(4, 16)
        self.c_in = nn.Conv2d(4, 8, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.t_bn = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.c_ln = nn.Conv1d(5, 6, 3)
        self.ln = nn.LayerNorm([6, 18])
        self.c_far = nn.Conv2d(3, 5, 3)
        self.bn_far = nn.BatchNorm2d(5)
        self.c_small = nn.Conv3d(2, 4, 2)
        self.gn_small = nn.GroupNorm(2, 4)
        self.c_shared = nn.Conv2d(3, 4, 3)
        self.gn_shared = nn.GroupNorm(2, 4)

    def forward(self, x, y, z, w, v):
        a = self.gn(self.c_gn(x))
        b = self.inorm(torch.relu(self.c_in(y)) * 2.0) * 0.5 - 1.0
        c = torch.tanh(self.bn(self.t_bn(z)))
        d = self.ln(self.c_ln(w))
        e = self.bn_far(self.c_far(x) + 100.0)
        f = self.gn_small(self.c_small(v))
        s = self.c_shared(x)
        g = self.gn_shared(s) + s
        return a, b, c, d, e, f, g


def get_inputs():
    return [torch.randn(3, 3, 12, 13), torch.randn(2, 4, 6, 7), torch.randn(2, 4, 5, 6), torch.randn(3, 5, 20),
            torch.randn(2, 2, 3, 3, 3)]


def get_init_inputs():
    return []

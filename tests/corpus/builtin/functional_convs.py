# Builtin compiler corpus: functional convolutions (F.conv1d/2d/3d,
# F.conv_transpose2d) on parameters and on a weight computed in the forward,
# with bias as a keyword, positional geometry, padding="same", groups, and
# an elementwise epilogue; one with 16 input channels (read tap by tap).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(8, 4, 3) * 0.3)
        self.w2 = nn.Parameter(torch.randn(16, 3, 3, 3) * 0.3)
        self.b2 = nn.Parameter(torch.randn(16))
        self.wt = nn.Parameter(torch.randn(16, 4, 2, 3) * 0.3)
        self.w3 = nn.Parameter(torch.randn(6, 2, 3, 3, 3) * 0.3)
        self.mask = nn.Parameter(torch.rand(6, 2, 3, 3, 3) > 0.3, requires_grad=False)
        self.wd = nn.Parameter(torch.randn(12, 16, 3, 3) * 0.2)

    def forward(self, x1, x2, x3):
        a = F.conv1d(x1, self.w1, None, 2, 1)
        b = torch.relu(F.conv2d(x2, self.w2, bias=self.b2, padding="same")) * 0.5
        c = F.conv_transpose2d(b, self.wt, stride=2, padding=1, output_padding=1, groups=2)
        d = F.conv3d(x3, self.w3 * self.mask, padding=(1, 0, 1), groups=2)
        e = F.conv2d(b, self.wd, dilation=2)
        return a, c - 1.0, d, e


def get_inputs():
    return [torch.randn(2, 4, 15), torch.randn(2, 3, 9, 10), torch.randn(2, 4, 5, 4, 6)]


def get_init_inputs():
    return []

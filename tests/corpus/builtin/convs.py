# Builtin compiler corpus: convolutions of every kind the compiler generates
# (1d/2d/3d, transposed, stride, padding, dilation, groups, depthwise, output
# padding, with and without bias), some with an elementwise epilogue reading
# a [C,1,1] parameter, one read twice (no epilogue), one feeding a reduction;
# wd, tw and v3 have 16 or more input channels per group (read tap by tap).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 16, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(3, 20, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), bias=False)
        self.c3 = nn.Conv3d(4, 8, 2, padding=1, groups=2)
        self.dw = nn.Conv2d(20, 20, 3, padding="same", groups=20)
        self.t1 = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.t2 = nn.ConvTranspose2d(20, 8, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2)
        self.t3 = nn.ConvTranspose3d(4, 4, 2, stride=2, bias=False)
        self.scale = nn.Parameter(torch.randn(20, 1, 1))
        self.wd = nn.Conv2d(20, 24, 3, padding=2, dilation=2)
        self.tw = nn.ConvTranspose2d(32, 16, (2, 3), stride=(2, 1), padding=(0, 1), groups=2)
        self.v3 = nn.Conv3d(16, 8, 3, stride=2, padding=1)

    def forward(self, x1, x2, x3, x4, x5):
        a = torch.relu(self.c1(x1)) * 0.5
        b = torch.tanh(self.c2(x2)) * self.scale
        c = self.c3(x3)
        d = self.dw(b) + 1.0
        e = self.t1(x1)
        f = torch.sigmoid(self.t2(b))
        g = self.t3(x3)
        h = torch.relu(self.wd(b))
        i = self.tw(x4) * 2.0
        j = self.v3(x5)
        return a, c + c.mean(dim=1, keepdim=True), d, e * e, f, g - 0.25, h, i, j


def get_inputs():
    return [torch.randn(2, 4, 17), torch.randn(2, 3, 9, 11), torch.randn(2, 4, 3, 5, 4), torch.randn(2, 32, 5, 6),
            torch.randn(1, 16, 5, 6, 7)]


def get_init_inputs():
    return []

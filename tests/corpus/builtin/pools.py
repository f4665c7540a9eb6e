# Builtin compiler corpus: max and average pooling in 1, 2 and 3 dimensions
# (default and explicit strides, padding, dilated max pooling, count_include_pad off), with
# elementwise work before a pool that only the pool reads (plan "prologue")
# and after it.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mp1 = nn.MaxPool1d(3, stride=2, padding=1)
        self.mp2 = nn.MaxPool2d(2)
        self.ap2 = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
        self.ap2b = nn.AvgPool2d((2, 3), stride=(1, 2), padding=(1, 1))
        self.mp3 = nn.MaxPool3d(2, stride=(1, 2, 2))
        self.ap3 = nn.AvgPool3d(2)
        self.mpd1 = nn.MaxPool1d(4, stride=1, padding=2, dilation=3)
        self.mpd2 = nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 3))

    def forward(self, x, v):
        a = self.mp2(torch.relu(x - 0.25))            # [4, 6, 5, 7]
        b = self.ap2(x * 2.0)                           # [4, 6, 6, 8]
        c = self.ap2b(x)
        d = self.mp1(x.flatten(2))                      # 1-d over H*W
        e = self.mp3(torch.tanh(v))
        f = self.ap3(v) + 1.0
        g = self.mpd1(x.flatten(2))                     # dilated windows
        h = self.mpd2(x)
        return a * 0.5, b, c, d, e, f, g, h


def get_inputs():
    return [torch.randn(4, 6, 11, 15), torch.randn(2, 3, 6, 8, 9)]


def get_init_inputs():
    return []

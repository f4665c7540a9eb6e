# Builtin compiler corpus: max and average pooling with ceil_mode, where the last window runs
# past the input (and for average pooling with count_include_pad past the padded input, so
# its divisor is smaller), and one where PyTorch drops a last window that would start in the
# right padding.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mp2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.ap2 = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.ap2x = nn.AvgPool2d(2, stride=3, padding=1, ceil_mode=True, count_include_pad=False)
        self.mp3 = nn.MaxPool3d(2, stride=2, padding=1, ceil_mode=True)
        self.ap3 = nn.AvgPool3d((2, 3, 2), stride=2, ceil_mode=True)
        self.mpd1 = nn.MaxPool1d(3, stride=2, dilation=2, ceil_mode=True)

    def forward(self, x, v):
        a = self.mp2(x)                     # [4, 6, 6, 7]; [4, 6, 5, 7] without ceil_mode
        b = self.ap2(torch.relu(x))         # [4, 6, 7, 8], last windows of 2 rows / columns
        c = self.ap2x(x)
        d = self.mp3(v)                     # the last window along W would start in padding
        e = self.ap3(v) * 2.0
        f = self.mpd1(x.flatten(2))
        return a, b, c, d, e, f


def get_inputs():
    return [torch.randn(4, 6, 12, 15), torch.randn(2, 3, 6, 8, 9)]


def get_init_inputs():
    return []

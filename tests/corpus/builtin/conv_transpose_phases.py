# Builtin compiler corpus: transposed convolutions computed by output phase
# (stride > 1): a kernel smaller than the stride (phases no tap reaches: bias
# only), padding larger than the stride with output padding, a 3-d one read
# tap by tap (16 input channels), grouped 1-d with an epilogue, a mixed one
# (stride 1 with dilation along one dimension, phased along the other), and
# strides with dilations (sharing a factor: phases no tap reaches; or not).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.ConvTranspose2d(8, 6, 1, stride=2)
        self.b = nn.ConvTranspose2d(6, 4, 5, stride=3, padding=4, output_padding=2)
        self.c = nn.ConvTranspose3d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.d = nn.ConvTranspose1d(4, 4, 4, stride=2, padding=1, groups=2)
        self.e = nn.ConvTranspose2d(8, 5, (3, 2), stride=(1, 3), dilation=(2, 1), padding=(1, 0))
        self.f = nn.ConvTranspose2d(8, 3, 3, stride=(2, 3), dilation=(2, 2), padding=(2, 1), output_padding=(1, 2))

    def forward(self, x, y, z):
        a = self.a(x)
        return a, self.b(a), self.c(z), torch.relu(self.d(y)) * 2.0, self.e(x), self.f(x)


def get_inputs():
    return [torch.randn(2, 8, 5, 4), torch.randn(2, 4, 9), torch.randn(1, 16, 3, 4, 2)]


def get_init_inputs():
    return []

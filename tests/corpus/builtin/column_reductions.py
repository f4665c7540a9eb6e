# Builtin compiler corpus: reductions over a convolution's output channels or
# a matrix product's output features, which the generated kernel computes on
# its accumulator tile (the full output never written): min over channels
# (torch.min(..., dim=1)[0]) with elementwise work on its value, a sum after an
# epilogue, a max over a strided transposed convolution's channels (one launch
# per output phase), a mean, a logsumexp over a 3-d convolution's channels, a
# softmax over a transposed convolution's channels with a per-channel bias and
# a sigmoid after it, and over Linear outputs (a log_softmax among them); and
# three that stay apart: a convolution also read elsewhere, a grouped
# convolution, and a Linear wider than one tile.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_min = nn.Conv2d(3, 8, 3)
        self.c_sum = nn.Conv2d(16, 24, 3, padding=1)
        self.t_max = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.c_mean = nn.Conv1d(5, 7, 4, bias=False)
        self.c_lse = nn.Conv3d(2, 5, 2)
        self.l_sum = nn.Linear(32, 40)
        self.l_lse = nn.Linear(32, 20)
        self.c_shared = nn.Conv2d(3, 8, 3)
        self.c_grouped = nn.Conv2d(4, 8, 3, groups=2)
        self.l_wide = nn.Linear(32, 300)
        self.t_soft = nn.ConvTranspose2d(4, 12, 3, stride=2, padding=1, output_padding=1)
        self.bias = nn.Parameter(torch.randn(12, 1, 1))
        self.l_log = nn.Linear(32, 24)

    def forward(self, x, y, z, w, v, u):
        a = torch.tanh(torch.tanh(torch.min(self.c_min(x), dim=1, keepdim=True)[0]) * 2.0)
        b = torch.relu(self.c_sum(y) * 0.5).sum(dim=1)
        c = self.t_max(z).amax(dim=1, keepdim=True)
        d = self.c_mean(w).mean(dim=1)
        e = torch.logsumexp(self.c_lse(v), dim=1)
        f = torch.nn.functional.gelu(self.l_sum(u)).sum(dim=-1)
        g = torch.logsumexp(self.l_lse(u), dim=-1, keepdim=True)
        s = self.c_shared(x)
        h = s.amax(dim=1) + s.mean()
        i = self.c_grouped(z).sum(dim=1)
        j = self.l_wide(u).amax(dim=-1)
        k = torch.sigmoid((torch.softmax(self.t_soft(z), dim=1) + self.bias) * 2.0)
        l = torch.log_softmax(self.l_log(u), dim=1)
        return a, b, c, d, e, f, g, h, i, j, k, l


def get_inputs():
    return [torch.randn(2, 3, 9, 10), torch.randn(2, 16, 6, 7), torch.randn(2, 4, 5, 6), torch.randn(3, 5, 12),
            torch.randn(2, 2, 4, 5, 6), torch.randn(6, 32)]


def get_init_inputs():
    return []

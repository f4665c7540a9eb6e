# Builtin compiler corpus: batch norms in evaluation mode (the model is put in
# eval mode when built), which use their running statistics: each becomes a
# per-channel affine map fused with the elementwise work around it. Running
# statistics, weights and biases are not their defaults; one norm has no
# affine parameters, and a 1-d norm reads [N, C] rows.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        self.bn_plain = nn.BatchNorm3d(c, affine=False, eps=1e-3)
        self.bn1 = nn.BatchNorm1d(c)
        with torch.no_grad():
            for bn in (self.bn, self.bn_plain, self.bn1):
                bn.running_mean.uniform_(-1.0, 1.0)
                bn.running_var.uniform_(0.5, 2.0)
            for bn in (self.bn, self.bn1):
                bn.weight.normal_()
                bn.bias.normal_()
        self.eval()

    def forward(self, x, v):
        y = torch.relu(self.bn(x * 2.0) + 1.0)
        z = self.bn_plain(y.unsqueeze(2))
        w = torch.tanh(self.bn1(v))
        return z, w


def get_inputs():
    return [torch.randn(4, 6, 5, 7), torch.randn(8, 6)]


def get_init_inputs():
    return [6]

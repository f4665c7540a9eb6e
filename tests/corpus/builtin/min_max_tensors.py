# Builtin compiler corpus: torch.min/torch.max of a tensor and a 0-d tensor
# are elementwise (KernelBench's Conv2d_Min_Add_Multiply and
# ConvTranspose2d_Add_Min_GELU_Multiply patterns): torch.tensor(number,
# device=x.device) traced as a call, and torch.tensor(attribute) that fx turns
# into a tensor constant; torch.min(x, dim)[0] stays a reduction. The device
# lookup of a fused intermediate neither splits the kernel nor materialises it.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = -0.5

    def forward(self, x):
        y = x + 1.0
        a = torch.min(y, torch.tensor(0.25, device=y.device))   # y lives inside the fused kernel
        b = torch.max(a, torch.tensor(self.c))
        c = torch.min(b, dim=1, keepdim=True)[0]
        return b * 2.0 + c


def get_inputs():
    return [torch.randn(4, 7, 9)]


def get_init_inputs():
    return []

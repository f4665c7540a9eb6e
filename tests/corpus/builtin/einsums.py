# Builtin compiler corpus: two-operand einsums lowered to matrix products
# that the compiler generates: a 4-d tensor times a matrix (KernelBench's
# Level-1 11) with a ReLU after it, Mamba2's state update over two batch
# indices with a permuted output, attention-style scores against a
# transposed operand, and a plain product whose output is transposed; and
# three that stay PyTorch's einsum: an outer product, a matrix-vector
# product and a product of three operands.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, w, c, d, q, k, x, y, v):
        r = torch.relu(torch.einsum("bijl,lk->bijk", a, w))
        s = torch.einsum("bhzc,bchpn->bzhpn", c, d)
        t = torch.einsum("bnd,bmd->bnm", q, k) * 0.5
        u = torch.einsum("ij,jk->ki", x, y)
        o = torch.einsum("i,j->ij", v, v)
        m = torch.einsum("ij,j->i", x, v)
        p = torch.einsum("ij,jk,kl->il", x, y, y.t())
        return r, s, t, u, o, m, p


def get_inputs():
    return [torch.randn(2, 3, 4, 5), torch.randn(5, 6), torch.randn(2, 3, 4, 4), torch.randn(2, 4, 3, 5, 6),
            torch.randn(3, 7, 8), torch.randn(3, 9, 8), torch.randn(10, 12), torch.randn(12, 12),
            torch.randn(12)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_mul_leaky_kernel(y_ptr, bias_ptr, out_ptr, n, N, multiplier, slope, BLOCK: tl.constexpr):
    # y = x @ W^T is (M, N) row-major: the column of flat index i is i % N.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offs % N, mask=mask, other=0.0)
    v = (y + b) * multiplier
    tl.store(out_ptr + offs, tl.where(v >= 0.0, v, v * slope), mask=mask)


class ModelNew(nn.Module):
    """The GEMM stays cuBLAS's (torch.mm, fp32 as nn.Linear); bias, scale and
    LeakyReLU are one Triton pass over its output instead of three."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())
        out = torch.empty_like(y)
        n = y.numel()
        BLOCK = 1024
        bias_mul_leaky_kernel[(triton.cdiv(n, BLOCK),)](y, self.gemm.bias, out, n, y.shape[1],
                                                         self.multiplier, self.negative_slope, BLOCK=BLOCK)
        return out

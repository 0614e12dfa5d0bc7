import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_gelu_softmax_kernel(y_ptr, bias_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    # One row of the GEMM's output per program: bias, exact GELU, then the
    # row's softmax, all in registers.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    y = tl.load(y_ptr + row * stride + cols, mask=mask, other=0.0)
    y += tl.load(bias_ptr + cols, mask=mask, other=0.0)
    g = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    g = tl.where(mask, g, float("-inf"))
    e = tl.exp(g - tl.max(g, axis=0))
    e = tl.where(mask, e, 0.0)
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    """torch.mm for the GEMM; bias, GELU and softmax fused in Triton."""

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t()).contiguous()
        out = torch.empty_like(y)
        M, N = y.shape
        bias_gelu_softmax_kernel[(M,)](y, self.linear.bias, out, N, y.stride(0),
                                       BLOCK=triton.next_power_of_2(N), num_warps=1)
        return out

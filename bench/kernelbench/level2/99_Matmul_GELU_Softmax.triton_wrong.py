# Wrong on purpose: the softmax runs down the columns (over the batch, dim 0)
# instead of along each row -- the row/column strides of a transposed view.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_gelu_softmax_kernel(y_ptr, bias_ptr, out_ptr, M, stride, BLOCK: tl.constexpr):
    # One column per program, walking the M rows.
    col = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    mask = rows < M
    y = tl.load(y_ptr + rows * stride + col, mask=mask, other=0.0)
    y += tl.load(bias_ptr + col)
    g = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    g = tl.where(mask, g, float("-inf"))
    e = tl.exp(g - tl.max(g, axis=0))
    e = tl.where(mask, e, 0.0)
    tl.store(out_ptr + rows * stride + col, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t()).contiguous()
        out = torch.empty_like(y)
        M, N = y.shape
        bias_gelu_softmax_kernel[(N,)](y, self.linear.bias, out, M, y.stride(0),
                                       BLOCK=triton.next_power_of_2(M), num_warps=4)
        return out

# Wrong on purpose: a one-block fast path and a chunked general path, and
# the general path forgets to divide by the row's sum.  (A softmax that is
# only too small would pass: every value of a 16384-wide row is below the
# 1e-2 tolerance.)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, ONE_BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    offs = tl.arange(0, BLOCK)
    if ONE_BLOCK:
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=float("-inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_row + offs, e / tl.sum(e, axis=0), mask=mask)
    else:
        m = tl.full((BLOCK,), float("-inf"), tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf"))
            m = tl.maximum(m, x)
        row_max = tl.max(m, axis=0)
        for start in range(0, n_cols, BLOCK):
            cols = start + offs
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=float("-inf"))
            tl.store(y_row + cols, tl.exp(x - row_max), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        BLOCK = min(4096, triton.next_power_of_2(cols))
        softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=BLOCK, ONE_BLOCK=cols <= BLOCK, num_warps=8)
        return y

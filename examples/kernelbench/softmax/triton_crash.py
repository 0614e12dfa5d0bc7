import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        # Crash: row stride of a billion elements.
        softmax_kernel[(rows,)](x, y, cols, 1 << 30, BLOCK=triton.next_power_of_2(cols))
        return y

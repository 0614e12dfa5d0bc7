# Wrong on purpose: the loop's step is left from an unrolled-by-two version
# (2 * BLOCK_M) but the body loads one tile: half the rows are summed.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, y_ptr, D1, D2, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # x is (B, D1, D2) contiguous, y is (B, 1, D2).  A program owns BLOCK_N
    # columns of one batch and walks D1 in BLOCK_M-row tiles: coalesced loads
    # along D2, the sum in fp32 registers.
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    base = x_ptr + b * D1 * D2
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for m in range(0, D1, 2 * BLOCK_M):
        r = m + rows
        mask = (r[:, None] < D1) & (cols[None, :] < D2)
        acc += tl.load(base + r[:, None].to(tl.int64) * D2 + cols[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + b * D2 + cols, tl.sum(acc, axis=0), mask=cols < D2)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 3 and self.dim == 1, "written for this problem's (B, D1, D2), dim 1"
        x = x.contiguous()
        B, D1, D2 = x.shape
        y = torch.empty((B, 1, D2), device=x.device, dtype=x.dtype)
        BLOCK_M, BLOCK_N = 32, 128
        sum_dim1_kernel[(B, triton.cdiv(D2, BLOCK_N))](x, y, D1, D2, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                                       num_warps=4)
        return y

# Wrong on purpose: divides by the mean square instead of its square root
# (for unit-variance inputs the two differ by ~10%, not by orders of magnitude).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, C, S, eps, BLOCK: tl.constexpr):
    # x is (B, C, S) contiguous; the mean is over C for every (b, s).  A
    # program owns BLOCK positions s of one b and walks the C channels twice.
    b = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < S
    base = b * C * S
    acc = tl.zeros((BLOCK,), tl.float32)
    for c in range(0, C):
        x = tl.load(x_ptr + base + c * S + offs, mask=mask, other=0.0)
        acc += x * x
    rstd = 1.0 / (acc / C + eps)
    for c in range(0, C):
        x = tl.load(x_ptr + base + c * S + offs, mask=mask, other=0.0)
        tl.store(y_ptr + base + c * S + offs, x * rstd, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        B, C = x.shape[0], x.shape[1]
        S = x.numel() // (B * C)
        BLOCK = 512
        rmsnorm_kernel[(B, triton.cdiv(S, BLOCK))](x, y, C, S, self.eps, BLOCK=BLOCK, num_warps=4)
        return y

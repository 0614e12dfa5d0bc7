import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + offs, d * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.copy_(torch.randn(features))
            self.norm.bias.copy_(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        layernorm_kernel[(rows,)](x, self.norm.weight, self.norm.bias, y, cols, x.stride(0), self.norm.eps,
                                  BLOCK=triton.next_power_of_2(cols))
        return y

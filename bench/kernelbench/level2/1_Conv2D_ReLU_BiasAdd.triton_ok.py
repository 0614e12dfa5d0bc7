import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(y_ptr, bias_ptr, out_ptr, n, C, HW, BLOCK: tl.constexpr):
    # y is the convolution's (N, C, H, W) output, contiguous: the channel of
    # flat index i is (i // HW) % C.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    c = (offs // HW) % C
    b = tl.load(bias_ptr + c, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0) + b, mask=mask)


class ModelNew(nn.Module):
    """torch's convolution (cuDNN), then ReLU and the bias add fused in one
    Triton pass instead of two elementwise kernels."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        C, HW = y.shape[1], y.shape[2] * y.shape[3]
        BLOCK = 1024
        relu_bias_kernel[(triton.cdiv(n, BLOCK),)](y, self.bias, out, n, C, HW, BLOCK=BLOCK)
        return out

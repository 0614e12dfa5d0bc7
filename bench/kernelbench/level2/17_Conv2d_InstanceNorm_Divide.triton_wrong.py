# Wrong on purpose: divides before normalising -- and normalising undoes
# the division, so the outputs are divide_by times too large.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def instnorm_div_kernel(y_ptr, out_ptr, HW, eps, inv_div, BLOCK: tl.constexpr):
    # One program per (n, c) plane of HW values; BLOCK >= HW, so the plane's
    # mean and (biased) variance come from one load.
    plane = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < HW
    y = tl.load(y_ptr + plane * HW + offs, mask=mask, other=0.0) * inv_div
    mean = tl.sum(y, axis=0) / HW
    d = tl.where(mask, y - mean, 0.0)
    var = tl.sum(d * d, axis=0) / HW
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(out_ptr + plane * HW + offs, d * rstd, mask=mask)


class ModelNew(nn.Module):
    """torch's convolution, then InstanceNorm (no affine, as nn.InstanceNorm2d's
    default) and the division in one Triton pass."""

    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        N, C, H, W = y.shape
        HW = H * W
        instnorm_div_kernel[(N * C,)](y, out, HW, self.instance_norm.eps, 1.0 / self.divide_by,
                                     BLOCK=triton.next_power_of_2(HW), num_warps=4)
        return out

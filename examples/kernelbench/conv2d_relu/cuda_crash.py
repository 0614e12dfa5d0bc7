# Crash: the kernel writes far outside its output (an illegal address).
# (A store through nullptr itself is undefined behaviour that nvcc may drop.)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// Direct convolution, stride 1, padding ks / 2, then ReLU: one thread per output.
__global__ void conv_relu_kernel(const float *x, const float *w, const float *bias, float *y,
                                 int N, int C, int H, int W, int OC, int ks)
{
    long idx = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long total = (long)N * OC * H * W;
    if (idx >= total)
        return;
    int ow = idx % W, oh = (idx / W) % H, oc = (idx / ((long)W * H)) % OC;
    int n = idx / ((long)W * H * OC), pad = ks / 2;
    float acc = bias[oc];
    for (int c = 0; c < C; c++)
        for (int kh = 0; kh < ks; kh++)
            for (int kw = 0; kw < ks; kw++) {
                int ih = oh + kh - pad, iw = ow + kw - pad;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                    continue;
                acc += x[(((long)n * C + c) * H + ih) * W + iw] * w[((oc * C + c) * ks + kh) * ks + kw];
            }
    y[idx + (1L << 40)] = fmaxf(acc, 0.f);
}

torch::Tensor conv_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b)
{
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    int N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3), OC = wc.size(0);
    auto y = torch::empty({N, OC, H, W}, xc.options());
    long total = (long)N * OC * H * W;
    conv_relu_kernel<<<(total + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
        N, C, H, W, OC, wc.size(2));
    return y;
}
"""

CPP_SRC = "torch::Tensor conv_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

# Compiled once per process, at import: a compile error is a COMPILATION_ERROR.
ext = load_inline(name="kgym_conv", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                 functions=['conv_relu_forward'], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return ext.conv_relu_forward(x, self.conv.weight, self.conv.bias)

# reference: examples/kernelbench/layernorm/reference.py
# Two kernels: the rows' statistics, then the normalisation with scale and shift.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void row_stats(const float *x, float *mean, float *rstd, int cols, float eps)
{
    __shared__ float s1[256], s2[256];
    const float *xr = x + (long)blockIdx.x * cols;
    float a = 0.f, b = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        a += xr[j];
        b += xr[j] * xr[j];
    }
    s1[threadIdx.x] = a;
    s2[threadIdx.x] = b;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            s1[threadIdx.x] += s1[threadIdx.x + k];
            s2[threadIdx.x] += s2[threadIdx.x + k];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float m = s1[0] / cols;
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = rsqrtf(fmaxf(s2[0] / cols - m * m, 0.f) + eps);
    }
}

__global__ void normalise(const float *x, const float *mean, const float *rstd, const float *w, const float *b,
                          float *y, int cols)
{
    long base = (long)blockIdx.x * cols;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        y[base + j] = (x[base + j] - mean[blockIdx.x]) * rstd[blockIdx.x] * w[j] + b[j];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps)
{
    auto xc = x.contiguous();
    int rows = xc.size(0), cols = xc.size(1);
    auto mean = torch::empty({rows}, xc.options());
    auto rstd = torch::empty({rows}, xc.options());
    auto y = torch::empty_like(xc);
    row_stats<<<rows, 256>>>(xc.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), cols, (float)eps);
    normalise<<<rows, 256>>>(xc.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                             w.contiguous().data_ptr<float>(), b.contiguous().data_ptr<float>(),
                             y.data_ptr<float>(), cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="bench_layernorm", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["layernorm_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.copy_(torch.randn(features))
            self.norm.bias.copy_(torch.randn(features))

    def forward(self, x):
        return ext.layernorm_forward(x, self.norm.weight, self.norm.bias, self.norm.eps)

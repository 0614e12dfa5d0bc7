# Crash: each block reads a row a million rows away.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// One block per row: mean, then variance, by shared-memory reductions.
__device__ float block_sum(float v, float *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

__global__ void layernorm_kernel(const float *x, const float *g, const float *b, float *y, int cols, float eps)
{
    extern __shared__ float red[];
    const float *xr = x + (long)(blockIdx.x + 1000000) * cols;
    float *yr = y + (long)blockIdx.x * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        s += xr[j];
    float mean = block_sum(s, red) / cols;
    float v = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        v += (xr[j] - mean) * (xr[j] - mean);
    float var = block_sum(v, red) / cols;
    float rstd = rsqrtf(var + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        yr[j] = (xr[j] - mean) * rstd * g[j] + b[j];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor g, torch::Tensor b, double eps)
{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    layernorm_kernel<<<rows, 256, 256 * sizeof(float), at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), g.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

CPP_SRC = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor g, torch::Tensor b, double eps);"

# Compiled once per process, at import: a compile error is a COMPILATION_ERROR.
ext = load_inline(name="kgym_layernorm", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                 functions=['layernorm_forward'], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.copy_(torch.randn(features))
            self.norm.bias.copy_(torch.randn(features))

    def forward(self, x):
        return ext.layernorm_forward(x, self.norm.weight, self.norm.bias, self.norm.eps)

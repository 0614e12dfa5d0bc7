# reference: bench/cuda_build/ref_sum.py
# A full reduction: block partial sums, then atomicAdd into a 0-d result.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void sum_kernel(const float *x, float *out, long n)
{
    __shared__ float red[512];
    float s = 0.f;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        s += x[i];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(out, red[0]);
}

torch::Tensor sum_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    auto out = torch::zeros({}, xc.options());
    sum_kernel<<<256, 512>>>(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel());
    return out;
}
"""

CPP_SRC = "torch::Tensor sum_forward(torch::Tensor x);"

ext = load_inline(name="bench_sum", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["sum_forward"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.sum_forward(x)

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float *x, float *y, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor relu_forward(torch::Tensor x);"

# Compiled once per process, at import: a compile error is a COMPILATION_ERROR.
ext = load_inline(name="kgym_relu", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                 functions=['relu_forward'], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)

# reference: bench/cuda_build/ref_rowsum.py
# A reduction: one block per row, a tree in shared memory.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void rowsum_kernel(const float *x, float *y, int cols)
{
    __shared__ float red[256];
    const float *xr = x + (long)blockIdx.x * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        s += xr[j];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        y[blockIdx.x] = red[0];
}

torch::Tensor rowsum_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0)}, xc.options());
    rowsum_kernel<<<xc.size(0), 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), (int)xc.size(1));
    return y;
}
"""

CPP_SRC = "torch::Tensor rowsum_forward(torch::Tensor x);"

ext = load_inline(name="bench_rowsum", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["rowsum_forward"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.rowsum_forward(x)

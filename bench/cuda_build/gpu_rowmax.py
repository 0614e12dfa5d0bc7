# reference: bench/cuda_build/ref_rowmax.py
# A reduction with warp shuffles: one warp per row.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void rowmax_kernel(const float *x, float *y, int rows, int cols)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows)
        return;
    const float *xr = x + (long)row * cols;
    float m = -INFINITY;
    for (int j = lane; j < cols; j += 32)
        m = fmaxf(m, xr[j]);
    for (int off = 16; off > 0; off >>= 1)
        m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
    if (lane == 0)
        y[row] = m;
}

torch::Tensor rowmax_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    int rows = xc.size(0), cols = xc.size(1);
    auto y = torch::empty({rows}, xc.options());
    rowmax_kernel<<<(rows + 7) / 8, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor rowmax_forward(torch::Tensor x);"

ext = load_inline(name="bench_rowmax", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["rowmax_forward"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.rowmax_forward(x)

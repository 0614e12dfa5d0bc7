# reference: examples/kernelbench/softmax/reference.py
# A reduction in two passes with -O3 and --use_fast_math (the -O3 PCH variant).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ float block_reduce(float v, float *red, bool is_max)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + s])
                                      : red[threadIdx.x] + red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

__global__ void softmax_fast(const float *x, float *y, int cols)
{
    __shared__ float red[256];
    const float *xr = x + (long)blockIdx.x * cols;
    float *yr = y + (long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        m = fmaxf(m, xr[j]);
    m = block_reduce(m, red, true);
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        s += __expf(xr[j] - m);
    s = block_reduce(s, red, false);
    float inv = 1.f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        yr[j] = __expf(xr[j] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_fast<<<xc.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), (int)xc.size(1));
    return y;
}
"""

CPP_SRC = "torch::Tensor softmax_forward(torch::Tensor x);"

ext = load_inline(name="bench_softmax_fast", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["softmax_forward"], extra_cflags=["-O3"],
                  extra_cuda_cflags=["-O3", "--use_fast_math"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_forward(x)

# reference: bench/cuda_build/ref_add.py
# An elementwise kernel, the smallest load_inline candidate.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void add_kernel(const float *a, const float *b, float *c, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

torch::Tensor add_forward(torch::Tensor a, torch::Tensor b)
{
    auto ac = a.contiguous(), bc = b.contiguous();
    auto c = torch::empty_like(ac);
    long n = ac.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), n);
    return c;
}
"""

CPP_SRC = "torch::Tensor add_forward(torch::Tensor a, torch::Tensor b);"

ext = load_inline(name="bench_add", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["add_forward"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.add_forward(a, b)

# Crash: the kernel writes through a null pointer.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// C (M, N) = A (M, K) @ B (K, N) [+ bias] [relu]; B given by its strides, so a
// transposed weight needs no copy.  One thread per output element.
__global__ void matmul_kernel(const float *a, const float *b, const float *bias, float *c,
                              int M, int N, int K, long sbk, long sbn, int relu)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float acc = 0.f;
    for (int k = 0; k < K; k++)
        acc += a[(long)row * K + k] * b[k * sbk + col * sbn];
    if (bias != nullptr)
        acc += bias[col];
    if (relu)
        acc = fmaxf(acc, 0.f);
    c[(long)row * N + col] = acc;
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b, c10::optional<torch::Tensor> bias, bool relu)
{
    auto ac = a.contiguous();
    int M = ac.size(0), K = ac.size(1), N = b.size(1);
    auto c = torch::empty({M, N}, ac.options());
    dim3 threads(16, 16);
    dim3 blocks((N + 15) / 16, (M + 15) / 16);
    matmul_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        ac.data_ptr<float>(), b.data_ptr<float>(), bias ? bias->data_ptr<float>() : nullptr,
        nullptr, M, N, K, b.stride(0), b.stride(1), relu);
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b, c10::optional<torch::Tensor> bias, bool relu);"

# Compiled once per process, at import: a compile error is a COMPILATION_ERROR.
ext = load_inline(name="kgym_matmul", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                 functions=['matmul_forward'], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.matmul_forward(a, b, None, False)

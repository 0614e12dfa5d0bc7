# reference: examples/kernelbench/matmul/reference.py
# device: cpu
# A blocked matmul in C++ with a shape check.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <algorithm>

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b)
{
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul: shapes do not match");
    auto ac = a.contiguous(), bc = b.contiguous();
    int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto c = torch::zeros({M, N}, ac.options());
    const float *A = ac.data_ptr<float>(), *B = bc.data_ptr<float>();
    float *C = c.data_ptr<float>();
    const int64_t T = 64;
    for (int64_t i0 = 0; i0 < M; i0 += T)
        for (int64_t k0 = 0; k0 < K; k0 += T)
            for (int64_t i = i0; i < std::min(i0 + T, M); i++)
                for (int64_t k = k0; k < std::min(k0 + T, K); k++) {
                    float aik = A[i * K + k];
                    for (int64_t j = 0; j < N; j++)
                        C[i * N + j] += aik * B[k * N + j];
                }
    return c;
}
"""

ext = load_inline(name="bench_cpu_matmul", cpp_sources=CPP_SRC, functions=["matmul_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.matmul_forward(a, b)

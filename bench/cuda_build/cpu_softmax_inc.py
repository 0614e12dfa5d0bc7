# reference: examples/kernelbench/softmax/reference.py
# device: cpu
# An extra include path: the prologue's meaning could change, so kgymd
# builds it plain (no PCH); the figure shows the plain cost inside kgymd.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <cmath>

torch::Tensor softmax_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    int64_t rows = xc.size(0), cols = xc.size(1);
    auto y = torch::empty_like(xc);
    const float *p = xc.data_ptr<float>();
    float *q = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; r++) {
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; c++)
            m = std::max(m, p[r * cols + c]);
        double s = 0;
        for (int64_t c = 0; c < cols; c++)
            s += std::exp(p[r * cols + c] - m);
        for (int64_t c = 0; c < cols; c++)
            q[r * cols + c] = (float)(std::exp(p[r * cols + c] - m) / s);
    }
    return y;
}
"""

ext = load_inline(name="bench_cpu_softmax", cpp_sources=CPP_SRC, functions=["softmax_forward"],
                  extra_include_paths=["/usr/include"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_forward(x)

# reference: bench/cuda_build/ref_rowsum.py
# device: cpu
# A reduction built with -O3 (the -O3 PCH variant).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
torch::Tensor rowsum_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    int64_t rows = xc.size(0), cols = xc.size(1);
    auto y = torch::empty({rows}, xc.options());
    const float *p = xc.data_ptr<float>();
    float *q = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++)
            s += p[r * cols + c];
        q[r] = (float)s;
    }
    return y;
}
"""

ext = load_inline(name="bench_cpu_rowsum", cpp_sources=CPP_SRC, functions=["rowsum_forward"],
                  extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.rowsum_forward(x)

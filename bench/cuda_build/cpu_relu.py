# reference: examples/kernelbench/relu/reference.py
# device: cpu
# The CPU form of a load_inline candidate: cpp_sources only, no flags.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
torch::Tensor relu_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float *p = xc.data_ptr<float>();
    float *q = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); i++)
        q[i] = p[i] > 0.f ? p[i] : 0.f;
    return y;
}
"""

ext = load_inline(name="bench_cpu_relu", cpp_sources=CPP_SRC, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)

# Wrong on purpose: the ReLU epilogue is applied after the output layer too.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_act_kernel(y_ptr, bias_ptr, n, N, RELU: tl.constexpr, BLOCK: tl.constexpr):
    # In place on the GEMM's (M, N) output: + bias, then ReLU for hidden layers.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    y += tl.load(bias_ptr + offs % N, mask=mask, other=0.0)
    if RELU:
        y = tl.maximum(y, 0.0)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    """The same layers (so the same parameters); each Linear is torch.mm plus
    a Triton epilogue that adds the bias and, between layers, applies ReLU."""

    def __init__(self, input_size, layer_sizes, output_size):
        super(ModelNew, self).__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        linears = [m for m in self.network if isinstance(m, nn.Linear)]
        for i, lin in enumerate(linears):
            y = torch.mm(x, lin.weight.t()).contiguous()
            n = y.numel()
            BLOCK = 1024
            bias_act_kernel[(triton.cdiv(n, BLOCK),)](y, lin.bias, n, y.shape[1],
                                                      RELU=True, BLOCK=BLOCK)
            x = y
        return x

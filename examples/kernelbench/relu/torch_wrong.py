import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """A leaky ReLU: right on the problem's own (non-negative) inputs, wrong
    on the signed-input trial."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.where(x > 0, x, 0.01 * x)

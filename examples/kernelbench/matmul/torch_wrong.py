import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Drops the last column of A's K dimension (an off-by-one)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.mm(a[:, :-1], b[:-1])

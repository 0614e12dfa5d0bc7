import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x @ w + b)."""

    def __init__(self, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n) / k ** 0.5)
        self.b = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.relu(x @ self.w + self.b)


M, K, N = 256, 512, 384


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]

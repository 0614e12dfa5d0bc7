import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        # Two halves of K, summed: a different order of the same sums.
        k = a.shape[1] // 2
        return torch.mm(a[:, :k], b[:k]) + torch.mm(a[:, k:], b[k:])

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Forgets the bias."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return torch.relu(F.conv2d(x, self.conv.weight, None, padding=self.conv.padding))

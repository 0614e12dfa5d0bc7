import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 convolution (padding 1) with bias, then ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return torch.relu(self.conv(x))


BATCH, C_IN, C_OUT, H, W, KS = 4, 8, 16, 32, 32, 3


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT, KS]

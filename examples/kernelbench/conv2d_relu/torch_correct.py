import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """im2col + matrix product + bias + ReLU.  The layer is created as the
    reference creates it, so under the same seed it has the same weights."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        n, _, h, w = x.shape
        k = self.conv.kernel_size[0]
        cols = F.unfold(x, k, padding=k // 2)                      # (n, c*k*k, h*w)
        wmat = self.conv.weight.reshape(self.conv.out_channels, -1)  # (oc, c*k*k)
        out = torch.matmul(wmat, cols) + self.conv.bias.view(1, -1, 1)
        return out.clamp_min(0.0).view(n, self.conv.out_channels, h, w)

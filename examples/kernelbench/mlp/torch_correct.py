import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The same layers (so the same weights under the same seed), with the
    bias folded into addmm."""

    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        h = torch.addmm(self.fc1.bias, x, self.fc1.weight.t()).clamp_min_(0.0)
        return torch.addmm(self.fc2.bias, h, self.fc2.weight.t())

import torch
import torch.nn as nn


class Model(nn.Module):
    """A small MLP: Linear, ReLU, Linear."""

    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


BATCH, D_IN, D_HIDDEN, D_OUT = 64, 256, 512, 128


def get_inputs():
    return [torch.randn(BATCH, D_IN)]


def get_init_inputs():
    return [D_IN, D_HIDDEN, D_OUT]

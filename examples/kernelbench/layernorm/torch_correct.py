import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.copy_(torch.randn(features))
            self.norm.bias.copy_(torch.randn(features))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
        return (x - mean) * torch.rsqrt(var + self.norm.eps) * self.norm.weight + self.norm.bias

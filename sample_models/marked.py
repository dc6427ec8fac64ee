"""The user's own mark_kernels regions and torch.utils.checkpoint inside a model."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import graphscope


class Expert(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class Marked(nn.Module):
    def __init__(self, d: int = 128) -> None:
        super().__init__()
        self.embed = nn.Linear(d, d)
        self.expert = Expert(d)
        self.ckpt = Expert(d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with graphscope.mark_kernels({"name": "prologue", "stage": 0}):
            h = torch.tanh(self.embed(x))
        with graphscope.mark_kernels("routing"):
            with graphscope.mark_kernels({"name": "expert", "stage": 1}):  # inner wins "name"
                h = h + self.expert(h)
        h = checkpoint(self.ckpt, h, use_reentrant=False)
        with graphscope.mark_kernels("forward_only", backward=False):
            h = self.out(h)
        return h


def graphscope_model():
    torch.manual_seed(0)
    return Marked(), (torch.randn(32, 128),)

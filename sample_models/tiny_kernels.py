"""A chain of 800 tiny elementwise kernels (~2 us each) on a small tensor: a graph whose
replay time is set by per-node launch and dependency latency, not by the work."""

import torch
from torch import nn


class TinyChain(nn.Module):
    def __init__(self, steps: int = 400) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.steps):
            x = x * 1.0001 + 0.5
        return x


def graphscope_model():
    return TinyChain(), (torch.randn(1024),)


def short_chain():
    """64 steps (128 kernels): the chain at a size whose bundles stay small (fixtures)."""
    return TinyChain(steps=64), (torch.randn(1024),)

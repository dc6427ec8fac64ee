"""A model that forks work onto a side stream and joins it back (mark_stream)."""

import torch
from torch import nn

import graphscope


class TwoTower(nn.Module):
    def __init__(self, d: int = 256) -> None:
        super().__init__()
        self.left = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.right = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, d))
        self._side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_cuda:
            return self.left(x) + self.right(x)
        if self._side is None:
            self._side = torch.cuda.Stream()
            graphscope.mark_stream(self._side, "side")
        main = torch.cuda.current_stream()
        self._side.wait_stream(main)
        with torch.cuda.stream(self._side):
            r = self.right(x)
        left = self.left(x)
        main.wait_stream(self._side)
        return left + r


def graphscope_model():
    torch.manual_seed(0)
    return TwoTower(), (torch.randn(64, 256),)

"""Two independent branches over one input, summed: captured on one stream (the default entry)
or with the right branch on a side stream (``--entry two_streams``).

On one stream the branches run one after the other although no data flows between them: the
diagnosis calls the edge between them stream-order-only, and its what-if span (those edges
removed) should come close to the span measured for the two-stream capture.
"""

import torch
from torch import nn


def _branch(d: int, depth: int) -> nn.Sequential:
    return nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.ReLU()) for _ in range(depth)])


class TwoBranch(nn.Module):
    def __init__(self, d: int = 1024, depth: int = 32, streams: int = 1) -> None:
        super().__init__()
        self.left = _branch(d, depth)
        self.right = _branch(d, depth)
        self.streams = streams
        self._side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.streams == 1 or not x.is_cuda:
            return self.left(x) + self.right(x)
        if self._side is None:
            self._side = torch.cuda.Stream()
        main = torch.cuda.current_stream()
        self._side.wait_stream(main)
        with torch.cuda.stream(self._side):
            r = self.right(x)
        left = self.left(x)
        main.wait_stream(self._side)
        return left + r


def graphscope_model():
    torch.manual_seed(0)
    return TwoBranch(streams=1), (torch.randn(32, 1024),)


def two_streams():
    torch.manual_seed(0)
    return TwoBranch(streams=2), (torch.randn(32, 1024),)


def small():
    """The two branches at a size whose bundles stay small (fixtures): 4 layers of 256."""
    torch.manual_seed(0)
    return TwoBranch(d=256, depth=4, streams=1), (torch.randn(32, 256),)

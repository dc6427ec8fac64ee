"""A small program for the regression-gate fixtures (bench/record_gate_fixtures.py): two
independent branches of four linear blocks over one input, summed (about 20 graph nodes).

Entries:
    graphscope_model  both branches on one stream: the program recorded again and again for
                      the A/A pairs
    extra_kernel      the same, plus one extra elementwise kernel in ``L.left.1`` over
                      ``GATE_EXTRA_ELEMENTS`` floats (the recorder sizes it to a share of the
                      span): an injected regression in a named module
    two_streams       the right branch on a side stream: a real speed-up
"""

import os

import torch
from torch import nn

EXTRA_MODULE = "L.left.1"  # where extra_kernel's kernel runs


class Block(nn.Module):
    def __init__(self, d: int, extra_elements: int = 0) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        # the injected kernel works on a buffer of its own: no effect on the output
        self.register_buffer("scratch", torch.ones(extra_elements) if extra_elements else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.scratch is not None:
            self.scratch.mul_(1.0)
        return torch.relu(self.fc(x))


class TwoBranch(nn.Module):
    def __init__(self, d: int = 1024, depth: int = 4, streams: int = 1,
                 extra_elements: int = 0) -> None:
        super().__init__()
        self.left = nn.Sequential(*[Block(d, extra_elements if i == 1 else 0)
                                    for i in range(depth)])
        self.right = nn.Sequential(*[Block(d) for _ in range(depth)])
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


def _inputs() -> tuple:
    return (torch.randn(32, 1024),)


def graphscope_model():
    torch.manual_seed(0)
    return TwoBranch(), _inputs()


def extra_kernel():
    elements = int(os.environ.get("GATE_EXTRA_ELEMENTS", "0"))
    if elements <= 0:
        raise SystemExit("extra_kernel: set GATE_EXTRA_ELEMENTS to the extra kernel's floats")
    torch.manual_seed(0)
    return TwoBranch(extra_elements=elements), _inputs()


def two_streams():
    torch.manual_seed(0)
    return TwoBranch(streams=2), _inputs()

"""What one module call costs under ``graphscope run``'s C ``nn.Module.__call__``
(csrc/modulecall.cpp), on the CPU: a model of 1,000 identity modules called inside a watched
"capture" (CUDA faked as in bench_watch_cpu.py, node counts faked: the driver's
``cuGraphGetNodes`` per note comes on top on a GPU, bench/probes/graph_get_nodes_gpu.py)
against the same model called plain. Prints microseconds per module call, the fastest of 20.

    .venv/bin/python bench/probes/module_call_cpu.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_watch_cpu as BW  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from graphscope.capture.config import CaptureConfig  # noqa: E402
from graphscope.capture.run import watch as W  # noqa: E402
from graphscope.capture.run.patch import patch_cuda_graph  # noqa: E402

CALLS = 1000


class Id(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.m = nn.ModuleList(Id() for _ in range(CALLS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.m:
            x = m(x)
        return x


def per_call(net: Net, x: torch.Tensor) -> float:
    t = time.perf_counter()
    net(x)
    return (time.perf_counter() - t) / CALLS * 1e6


def watched(net: Net, x: torch.Tensor) -> float:
    w = W.GraphWatch(CaptureConfig(mode="run", replays=0, op_captures=0, record_ops=False))
    undo = patch_cuda_graph(w)
    out = []
    try:
        for _ in range(20):
            g = torch.cuda.CUDAGraph()
            g.capture_begin()
            out.append(per_call(net, x))
            g.capture_end()
    finally:
        undo()
        w._close_window()
        w._release_batch()
        w.pending.clear()
    return min(out)


def main() -> None:
    BW.fake_cuda()
    net, x = Net(), torch.zeros(1)
    plain = min(per_call(net, x) for _ in range(20))
    watched(net, x)  # the first window resolves every module's scope (Python)
    w = watched(net, x)
    plain = min(plain, min(per_call(net, x) for _ in range(20)))
    print(f"plain {plain:.3f} us per module call, watched {w:.3f} us (+{w - plain:.3f})")


if __name__ == "__main__":
    main()

"""What the first read of a graph costs in a fresh process: ``graphscope run`` reads each graph
before ``capture_end`` (``native.inspect_graph``: cuGraphGetNodes, the node types and kernel
parameters, CUPTI's node ids) and the exec id after it (``cuptiGetGraphExecId``). The first
CUPTI call of a process may initialize CUPTI: if that lands in the program's first capture it
is part of the ladder's first-capture cost (23-25 ms under ``run`` against 6-8 ms plain, eighth
session). Per variant, in fresh processes (graphscope's extension loaded as ``run``'s install
does), milliseconds of:

- ``cold``: the first ``inspect_graph`` of a small captured graph, then ``exec_id``, then a second
  graph's ``inspect_graph`` (warm);
- ``ts_first``: ``cuptiGetTimestamp`` called first (would a call at install warm CUPTI?), then
  the same reads.

Needs a GPU: ``python3 bench/probes/first_read_gpu.py [ROUNDS]``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _measure import variant_probe  # noqa: E402

PROBE = r'''
import ctypes, json, sys, time
import torch
from graphscope import native

VARIANT = sys.argv[1]
native.ensure_loaded()  # what GraphWatch.install does
lib = ctypes.CDLL(native.loaded_cupti_paths()[0])
out = {}
x = torch.zeros(1024, device="cuda")
for _ in range(3):  # the kernels loaded (CUDA's lazy loading) before any capture
    x.add_(1).mul_(2)
torch.cuda.synchronize()
if VARIANT == "ts_first":
    ts = ctypes.c_uint64()
    t = time.perf_counter()
    lib.cuptiGetTimestamp(ctypes.byref(ts))
    out["timestamp_ms"] = (time.perf_counter() - t) * 1e3


def graph():
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        for _ in range(20):
            x.add_(1).mul_(2)
    return g


a, b = graph(), graph()
t = time.perf_counter()
native.inspect_graph(a.raw_cuda_graph(), demangle=False)
out["inspect1_ms"] = (time.perf_counter() - t) * 1e3
a.instantiate()
t = time.perf_counter()
native.exec_id(a.raw_cuda_graph_exec())
out["exec_id1_ms"] = (time.perf_counter() - t) * 1e3
t = time.perf_counter()
native.inspect_graph(b.raw_cuda_graph(), demangle=False)
out["inspect2_ms"] = (time.perf_counter() - t) * 1e3
print("RESULT", json.dumps(out))
'''


def main(rounds: int) -> None:
    variant_probe(PROBE, "first_read.py", ("cold", "ts_first"), rounds, seed=5)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

"""What one node-count note costs: ``cuGraphGetNodes(graph, NULL, &n)`` on the graph being
captured, at several graph sizes (node counts call it at every scope or op change of the
capturing thread, csrc/nodecount.cpp), next to the capture of one small kernel.

Needs a GPU: ``python3 bench/probes/graph_get_nodes_gpu.py`` (one line per graph size: µs per
call, median of 5 batches of 2,000 calls; µs per captured ``add_``).
"""

from __future__ import annotations

import ctypes
import statistics
import time

import torch


def main() -> None:
    cu = ctypes.CDLL("libcuda.so.1")
    get_info = cu.cuStreamGetCaptureInfo_v3
    get_nodes = cu.cuGraphGetNodes
    get_nodes.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    x = torch.zeros(16, device="cuda")
    s = torch.cuda.Stream()
    for size in (1, 100, 300, 1000):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            t = time.perf_counter()
            for _ in range(size):
                x.add_(1)
            per_kernel = (time.perf_counter() - t) / size * 1e6
            status, cid, graph = ctypes.c_int(), ctypes.c_uint64(), ctypes.c_void_p()
            deps, edges, nd = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
            r = get_info(ctypes.c_void_p(s.cuda_stream), ctypes.byref(status), ctypes.byref(cid),
                         ctypes.byref(graph), ctypes.byref(deps), ctypes.byref(edges),
                         ctypes.byref(nd))
            assert r == 0, r
            n = ctypes.c_size_t()
            batches = []
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(2000):
                    get_nodes(graph, None, ctypes.byref(n))
                batches.append((time.perf_counter() - t) / 2000 * 1e6)
            v = ctypes.c_int()
            base = []
            for _ in range(5):  # a trivial driver call through ctypes: the floor
                t = time.perf_counter()
                for _ in range(2000):
                    cu.cuDriverGetVersion(ctypes.byref(v))
                base.append((time.perf_counter() - t) / 2000 * 1e6)
            loop = statistics.median(base)
        print(f"nodes {n.value:5d}: cuGraphGetNodes {statistics.median(batches) - loop:.3f} us "
              f"more than cuDriverGetVersion, captured add_ {per_kernel:.2f} us", flush=True)


if __name__ == "__main__":
    main()

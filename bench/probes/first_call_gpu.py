"""Which call makes a process's first graph read slow: ``native.inspect_graph``'s first call took
13-18 ms, its second 0.08 ms (``first_read_gpu.py``), and ``cuptiGetTimestamp`` first did not
help. Times each driver and CUPTI call ``inspect_graph`` makes, first call in a fresh process,
in two orders, and whether reading an empty graph made with the driver API (no capture, no
kernel, no allocation) beforehand takes the cost out of the first real read:

- ``driver_first``: cuGraphGetNodes, cuGraphNodeGetType, cuGraphKernelNodeGetParams,
  cuFuncGetName on every node, then cuptiGetGraphNodeId, cuptiGetGraphId;
- ``cupti_first``: the CUPTI calls first, then the driver's;
- ``empty_warm``: cuGraphCreate + cuGraphAddEmptyNode + cuptiGetGraphNodeId + cuptiGetGraphId +
  cuGraphDestroy first (timed as ``warm``), then ``driver_first``'s sequence;
- ``empty_warm_early``: the same warm-up right after graphscope's extension is loaded, before the
  program's first CUDA allocation (says whether a context was current then: ``ctx_before``).

Needs a GPU: ``python3 bench/probes/first_call_gpu.py [ROUNDS]``.
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

V = sys.argv[1]
P = ctypes.c_void_p
native.ensure_loaded()  # what GraphWatch.install does
cu = ctypes.CDLL("libcuda.so.1")
cupti = ctypes.CDLL(native.loaded_cupti_paths()[0])
out = {}


def ms(key, fn):
    t = time.perf_counter()
    r = fn()
    out[key] = round(out.get(key, 0.0) + (time.perf_counter() - t) * 1e3, 3)
    return r


def warm(key):
    ctx = P()
    cu.cuCtxGetCurrent(ctypes.byref(ctx))
    out["ctx_before"] = bool(ctx.value)

    def go():
        g, n = P(), P()
        assert cu.cuGraphCreate(ctypes.byref(g), 0) == 0
        assert cu.cuGraphAddEmptyNode(ctypes.byref(n), g, None, ctypes.c_size_t(0)) == 0
        nid, gid = ctypes.c_uint64(), ctypes.c_uint32()
        out["warm_rc"] = [cupti.cuptiGetGraphNodeId(n, ctypes.byref(nid)),
                          cupti.cuptiGetGraphId(g, ctypes.byref(gid))]
        cu.cuGraphDestroy(g)

    ms(key, go)
    cu.cuCtxGetCurrent(ctypes.byref(ctx))
    out["ctx_after"] = bool(ctx.value)


if V == "empty_warm_early":
    warm("warm")
x = torch.zeros(1024, device="cuda")
for _ in range(3):  # the kernels loaded (CUDA's lazy loading) before any capture
    x.add_(1).mul_(2)
torch.cuda.synchronize()
if V == "empty_warm":
    warm("warm")
g = torch.cuda.CUDAGraph(keep_graph=True)
with torch.cuda.graph(g):
    for _ in range(20):
        x.add_(1).mul_(2)
graph = P(g.raw_cuda_graph())


def driver():
    n = ctypes.c_size_t()
    ms("get_nodes", lambda: cu.cuGraphGetNodes(graph, None, ctypes.byref(n)))
    nodes = (P * n.value)()
    ms("get_nodes", lambda: cu.cuGraphGetNodes(graph, nodes, ctypes.byref(n)))
    for node in nodes:
        t = ctypes.c_int()
        ms("get_type", lambda: cu.cuGraphNodeGetType(P(node), ctypes.byref(t)))
        if t.value == 0:
            buf = (ctypes.c_char * 256)()
            ms("kernel_params", lambda: cu.cuGraphKernelNodeGetParams_v2(P(node), buf))
            func = P.from_buffer(buf).value
            name = ctypes.c_char_p()
            ms("func_name", lambda: cu.cuFuncGetName(ctypes.byref(name), P(func)))
    return nodes


def cupti_calls(nodes):
    nid, gid = ctypes.c_uint64(), ctypes.c_uint32()
    for i, node in enumerate(nodes):
        ms("cupti_node_id_first" if i == 0 else "cupti_node_id_rest",
           lambda: cupti.cuptiGetGraphNodeId(P(node), ctypes.byref(nid)))
    ms("cupti_graph_id", lambda: cupti.cuptiGetGraphId(graph, ctypes.byref(gid)))


if V == "cupti_first":
    n = ctypes.c_size_t()
    cu.cuGraphGetNodes(graph, None, ctypes.byref(n))
    nodes = (P * n.value)()
    cu.cuGraphGetNodes(graph, nodes, ctypes.byref(n))
    cupti_calls(nodes)
    driver()
else:
    cupti_calls(driver())
t = time.perf_counter()
native.inspect_graph(graph.value, demangle=False)
out["inspect_after_ms"] = round((time.perf_counter() - t) * 1e3, 3)
print("RESULT", json.dumps(out))
'''


def main(rounds: int) -> None:
    variant_probe(PROBE, "first_call.py",
                  ("driver_first", "cupti_first", "empty_warm", "empty_warm_early"), rounds,
                  seed=3)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)

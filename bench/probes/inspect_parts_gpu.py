"""What reading a graph during its capture costs, call by call, and whether the driver lists a
captured graph's nodes in creation order.

bench_ladder.py's 16-layer decoder ladder (67 buckets, one shared pool, graphs kept alive as a
serving engine keeps them) is captured under graphscope's extension (no watch). Just before
each ``capture_end`` the probe times, through ctypes (a trivial driver call's time taken off):
``cuptiGetGraphNodeId`` and ``cuGraphKernelNodeGetParams`` per node, and graphscope's whole
``inspect_graph``. It checks on every graph that each node's CUPTI local id equals its position
in ``cuGraphGetNodes`` (what a positional id would need). Also the cost of the clocks read per
module call (``time.time_ns``: CLOCK_REALTIME; ``time.perf_counter``) and the host's
clocksource (a clock read is a system call where the clocksource has no vDSO path).

Needs a GPU: ``python3 bench/probes/inspect_parts_gpu.py``.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from bench_ladder import MODEL  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _driver import driver_calls  # noqa: E402

from graphscope import native  # noqa: E402


def per_call_us(fn, n: int = 20000) -> float:
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(best)


def main() -> None:
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            print("clocksource", f.read().strip())
    except OSError as exc:
        print("clocksource unknown:", exc)
    print(f"time.time_ns {per_call_us(time.time_ns) * 1e3:.0f} ns, time.perf_counter "
          f"{per_call_us(time.perf_counter) * 1e3:.0f} ns, time.thread_time "
          f"{per_call_us(time.thread_time) * 1e3:.0f} ns a call")
    d = driver_calls()
    native.warm_graph_ids()
    cu, get_info, get_nodes, node_id = d.cu, d.capture_info, d.graph_nodes, d.node_id
    kparams = cu.cuGraphKernelNodeGetParams_v2
    kparams.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    v = ctypes.c_int()
    ns: dict = {}
    exec(MODEL, ns)
    model, tokens, sizes = ns["model"], ns["tokens"], ns["SIZES"]
    pool = torch.cuda.graph_pool_handle()
    keep, rows, mismatched = [], [], 0
    buf = ctypes.create_string_buffer(256)
    with torch.inference_mode():
        for bs in sizes:
            model(tokens[:bs])
        torch.cuda.synchronize()
        for bs in reversed(sizes):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                out = model(tokens[:bs])
                s = torch.cuda.current_stream().cuda_stream
                status, cid, graph = ctypes.c_int(), ctypes.c_uint64(), ctypes.c_void_p()
                deps, edges, nd = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
                assert get_info(ctypes.c_void_p(s), ctypes.byref(status), ctypes.byref(cid),
                                ctypes.byref(graph), ctypes.byref(deps), ctypes.byref(edges),
                                ctypes.byref(nd)) == 0
                n = ctypes.c_size_t()
                get_nodes(graph, None, ctypes.byref(n))
                arr = (ctypes.c_void_p * n.value)()
                get_nodes(graph, arr, ctypes.byref(n))
                nodes = list(arr)
                out_id = ctypes.c_uint64()
                t = time.perf_counter()
                ids = []
                for x in nodes:
                    node_id(x, ctypes.byref(out_id))
                    ids.append(out_id.value)
                t_ids = time.perf_counter() - t
                t = time.perf_counter()
                for x in nodes:
                    kparams(x, buf)
                t_kp = time.perf_counter() - t
                t = time.perf_counter()
                for _ in nodes:
                    cu.cuDriverGetVersion(ctypes.byref(v))
                t_base = time.perf_counter() - t
                t = time.perf_counter()
                native.inspect_graph(graph.value, demangle=False)
                t_ins = time.perf_counter() - t
                local = [i & 0xFFFFFFFF for i in ids]
                if local != list(range(len(nodes))):
                    mismatched += 1
                k = max(len(nodes), 1)
                rows.append((len(nodes), (t_ids - t_base) / k * 1e6, (t_kp - t_base) / k * 1e6,
                             t_ins * 1e6))
            keep.append((g, out))
    print(f"{len(rows)} graphs, {statistics.median(r[0] for r in rows)} nodes (median); graphs "
          f"whose CUPTI local ids are not their cuGraphGetNodes positions: {mismatched}")
    print(f"cuptiGetGraphNodeId {statistics.median(r[1] for r in rows):.3f} us/node, "
          f"cuGraphKernelNodeGetParams {statistics.median(r[2] for r in rows):.3f} us/node "
          f"(each above cuDriverGetVersion through ctypes); inspect_graph "
          f"{statistics.median(r[3] for r in rows):.1f} us/graph")
    print("by graph (first, middle, last):", rows[0], rows[len(rows) // 2], rows[-1])


if __name__ == "__main__":
    main()

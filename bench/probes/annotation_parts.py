"""Where the annotated capture's extra time goes, phase by phase (issue 15, T2).

python3 bench/probes/annotation_parts.py [depth] [rounds]

bench_annotation's model and step, captured by interleaved variants, each into its own pool:
  plain     torch.cuda.graph
  cupti     torch.cuda.graph inside the CUPTI recorder only (graphscope.native.recording)
  hooks     graphscope.graph(enable_annotations=True) with backward attributed by Python
            autograd hooks (GRAPHSCOPE_OP_OBSERVER=python)
  annotated graphscope.graph(enable_annotations=True) (the native observer's backward)
Prints the median of each phase: enter (synchronize, gc, empty_cache, capture_begin, session
start), forward, backward, exit (capture_end = instantiate, session end, publish), in wall time
and in the process's CPU time (all threads: autograd's device thread runs backward), which a
busy shared host disturbs less.
"""

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_annotation as B  # noqa: E402

import graphscope  # noqa: E402
from graphscope import native  # noqa: E402


def one(model, x, variant, pool):
    os.environ["GRAPHSCOPE_OP_OBSERVER"] = "python" if variant == "hooks" else "native"
    g = torch.cuda.CUDAGraph()
    for p in model.parameters():
        p.grad = None
    torch.cuda.synchronize()
    t = [time.perf_counter()]
    c = [time.process_time()]
    if variant == "plain":
        cm = torch.cuda.graph(g, pool=pool)
    elif variant == "cupti":
        rec = native.recording()
        rec.__enter__()
        cm = torch.cuda.graph(g, pool=pool)
    else:
        cm = graphscope.graph(g, pool=pool, enable_annotations=True)
    with cm:
        t.append(time.perf_counter())
        c.append(time.process_time())
        loss = model(x).sum()
        t.append(time.perf_counter())
        c.append(time.process_time())
        loss.backward()
        t.append(time.perf_counter())
        c.append(time.process_time())
    if variant == "cupti":
        rec.__exit__(None, None, None)
    torch.cuda.synchronize()
    t.append(time.perf_counter())
    c.append(time.process_time())
    return g, [b - a for a, b in zip(t, t[1:])] + [b - a for a, b in zip(c, c[1:])]


def main():
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    model = B.warmed(depth, x)
    variants = ("plain", "cupti", "hooks", "annotated")
    pools = {v: torch.cuda.graph_pool_handle() for v in variants}
    keep = {}
    times = {v: [] for v in variants}
    for r in range(rounds + 2):
        for v in variants:
            keep[v], ph = one(model, x, v, pools[v])
            if r >= 2:
                times[v].append(ph)
        graphscope.clear_kernel_annotations()
    print(f"depth {depth}, {rounds} rounds, medians in ms")
    for what, sl in (("wall", slice(0, 4)), ("cpu", slice(4, 8))):
        print(f"{what:10} {'enter':>7} {'forward':>8} {'backward':>9} {'exit':>7} {'total':>7}")
        for v in variants:
            rows = [p[sl] for p in times[v]]
            med = [statistics.median(c) * 1e3 for c in zip(*rows)]
            tot = statistics.median(sum(p) for p in rows) * 1e3
            print(f"{v:10} {med[0]:7.2f} {med[1]:8.2f} {med[2]:9.2f} {med[3]:7.2f} {tot:7.2f}")


if __name__ == "__main__":
    main()

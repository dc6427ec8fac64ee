"""Where the annotated capture's extra time goes, phase by phase (the overhead target).

python3 bench/probes/annotation_parts.py [depth[,depth...]] [rounds]
(KEEP_ANNOTATIONS=1: never clear the annotation maps, as bench_annotation; VARIANTS=plain,annotated)

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
    depths = [int(d) for d in (sys.argv[1] if len(sys.argv) > 1 else "4").split(",")]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    keep_maps = os.environ.get("KEEP_ANNOTATIONS") == "1"  # as bench_annotation (never cleared)
    variants = os.environ.get("VARIANTS", "plain,cupti,hooks,annotated").split(",")
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    models = {d: B.warmed(d, x) for d in depths}
    pools = {(d, v): torch.cuda.graph_pool_handle() for d in depths for v in variants}
    keep = {}
    times = {(d, v): [] for d in depths for v in variants}
    for r in range(rounds + 2):
        for d in depths:  # depths interleaved, as in bench_annotation
            for v in variants:
                keep[d, v], ph = one(models[d], x, v, pools[d, v])
                if r >= 2:
                    times[d, v].append(ph)
            if not keep_maps:
                graphscope.clear_kernel_annotations()
    for d in depths:
        print(f"depth {d}, {rounds} rounds, medians in ms"
              f"{' (annotation maps kept)' if keep_maps else ''}")
        for what, sl in (("wall", slice(0, 4)), ("cpu", slice(4, 8))):
            print(f"{what:10} {'enter':>7} {'forward':>8} {'backward':>9} {'exit':>7} {'total':>7}")
            for v in variants:
                rows = [p[sl] for p in times[d, v]]
                med = [statistics.median(c) * 1e3 for c in zip(*rows)]
                tot = statistics.median(sum(p) for p in rows) * 1e3
                print(f"{v:10} {med[0]:7.2f} {med[1]:8.2f} {med[2]:9.2f} {med[3]:7.2f} {tot:7.2f}")
            if "plain" in variants:  # each round's variant minus the plain capture before it
                for v in variants:
                    if v == "plain":
                        continue
                    diffs = [[b - a for a, b in zip(p[sl], q[sl])]
                             for p, q in zip(times[d, "plain"], times[d, v])]
                    med = [statistics.median(c) * 1e3 for c in zip(*diffs)]
                    tot = statistics.median(sum(p) for p in diffs) * 1e3
                    print(f"{v + '-plain':10} {med[0]:7.2f} {med[1]:8.2f} {med[2]:9.2f} "
                          f"{med[3]:7.2f} {tot:7.2f}")


if __name__ == "__main__":
    main()

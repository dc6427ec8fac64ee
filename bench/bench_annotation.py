"""Annotation overhead at capture vs nesting depth (issues 3 and 15), side by side in one process.

Graph: a deep MLP of Linear+LayerNorm+GELU blocks, forward+loss+backward, ~2,500 nodes.
For each depth d, every block runs inside d nested mark_kernels scopes. Reports the median
capture time (and the quartiles) of plain torch.cuda.graph, of
graphscope.graph(enable_annotations=True), and of the same with record_ops=True recorded by the
native op observer and by the Python dispatch mode (GRAPHSCOPE_OP_OBSERVER=python), their ratios,
and replay time after each capture. The variants are interleaved, REPEATS rounds each.
Writes JSON to argv[1] (default stdout).
"""

import contextlib
import json
import os
import statistics
import sys
import time

import torch
from torch import nn

import graphscope

BLOCKS = 150
REPEATS = int(os.environ.get("BENCH_REPEATS", "15"))
CPU: list = []  # process CPU time of each capture (all threads), in call order


class Deep(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.depth = depth
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU()) for _ in range(BLOCKS)
        )

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            with contextlib.ExitStack() as st:
                for lvl in range(self.depth):
                    st.enter_context(graphscope.mark_kernels({"name": f"b{i}", f"l{lvl}": lvl}))
                x = b(x)
        return x


def warmed(depth, x):
    """A Deep(depth) on the GPU after three eager steps on a side stream (as before capture)."""
    model = Deep(depth).cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step(model, x)
    torch.cuda.current_stream().wait_stream(s)
    return model


def step(model, x):
    for p in model.parameters():
        p.grad = None
    model(x).sum().backward()


def capture(model, x, annotate, record_ops=False, observer="native", pool=None):
    os.environ["GRAPHSCOPE_OP_OBSERVER"] = observer
    g = torch.cuda.CUDAGraph()
    for p in model.parameters():
        p.grad = None
    torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    if annotate:
        with graphscope.graph(g, pool=pool, enable_annotations=True, record_ops=record_ops):
            model(x).sum().backward()
    else:
        with torch.cuda.graph(g, pool=pool):
            model(x).sum().backward()
    torch.cuda.synchronize()
    CPU.append(time.process_time() - c0)
    return g, time.perf_counter() - t0


def replay_ms(g, n=50):
    g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / n


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    rows = []
    for depth in (1, 4, 16):
        model = warmed(depth, x)
        plain, annot, ops, pyops = [], [], [], []
        # One memory pool per variant, kept across its rounds (the previous graph of the
        # variant holds it): no variant's capture pays cudaMalloc for segments that
        # torch.cuda.graph's empty_cache() gave back, the largest source of round-to-round noise.
        pools = [torch.cuda.graph_pool_handle() for _ in range(4)]
        gp = ga = go = gpy = None
        cpu = []
        for _ in range(REPEATS):  # interleaved, same process
            CPU.clear()
            gp, tp = capture(model, x, False, pool=pools[0])
            ga, ta = capture(model, x, True, pool=pools[1])
            go, to = capture(model, x, True, record_ops=True, pool=pools[2])
            gpy, tpy = capture(model, x, True, record_ops=True, observer="python", pool=pools[3])
            cpu.append(list(CPU))
            plain.append(tp)
            annot.append(ta)
            ops.append(to)
            pyops.append(tpy)
        graphscope.clear_kernel_annotations()
        capture(model, x, True, pool=pools[1])
        nodes = len(graphscope.get_kernel_annotations())
        rp, ra = replay_ms(gp), replay_ms(ga)
        med = statistics.median
        rows.append({
            "depth": depth,
            "annotated_nodes": nodes,
            "plain_capture_ms": med(plain) * 1e3,
            "annotated_capture_ms": med(annot) * 1e3,
            "annotated_plus_ops_capture_ms": med(ops) * 1e3,
            "annotated_plus_ops_python_mode_ms": med(pyops) * 1e3,
            "quartiles_ms": {k: [q * 1e3 for q in statistics.quantiles(v, n=4)]
                             for k, v in (("plain", plain), ("annotated", annot),
                                          ("ops", ops), ("ops_python", pyops))},
            "overhead_ratio": (med(annot) - med(plain)) / med(plain),
            "overhead_ratio_with_ops": (med(ops) - med(plain)) / med(plain),
            "overhead_ratio_with_ops_python_mode": (med(pyops) - med(plain)) / med(plain),
            # each round's variant over the plain capture right before it, median over rounds
            "paired_overhead_ratio": med(a / p - 1 for a, p in zip(annot, plain)),
            "paired_overhead_ratio_with_ops": med(a / p - 1 for a, p in zip(ops, plain)),
            # the same from the process's CPU time (all threads), less disturbed by a busy host
            "cpu_plain_capture_ms": med(c[0] for c in cpu) * 1e3,
            "cpu_annotated_capture_ms": med(c[1] for c in cpu) * 1e3,
            "paired_cpu_overhead_ratio": med(c[1] / c[0] - 1 for c in cpu),
            "paired_cpu_overhead_ratio_with_ops": med(c[2] / c[0] - 1 for c in cpu),
            "replay_plain_ms": rp,
            "replay_annotated_ms": ra,
            "replay_ratio": ra / rp,
        })
        graphscope.clear_kernel_annotations()
    from graphscope import native

    os.environ.pop("GRAPHSCOPE_OP_OBSERVER", None)
    out = json.dumps({"bench": "annotation_overhead", "blocks": BLOCKS, "repeats": REPEATS,
                      "torch": torch.__version__, "op_observer": native.op_observer_why() or
                      "native", "rows": rows}, indent=1)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(out)
    print(out)


if __name__ == "__main__":
    main()

"""Annotation overhead at capture vs nesting depth, side by side in one process.

Graph: a deep MLP of Linear+LayerNorm+GELU blocks, forward+loss+backward, ~2,500 nodes.
For each depth d, every block runs inside d nested mark_kernels scopes. Reports the median
capture time (and the quartiles) of plain torch.cuda.graph, of
graphscope.graph(enable_annotations=True), and of the same with record_ops=True recorded by the
native op observer (and, with BENCH_PYTHON_MODE=1, by the Python dispatch mode), their ratios,
and replay time after each capture. Every round captures every depth and variant in turn
(depths interleaved, so a drift of the host's speed falls on all depths alike); REPEATS rounds
after WARMUP discarded ones. Per depth: the median over rounds of each round's ratio to the
plain capture right before it ("paired"), with a bootstrap 95% interval, and the flatness
across depths: each depth's paired overhead relative to the mean over depths, resampling whole
rounds. Per-round times are kept in the JSON. Writes JSON to argv[1] (default stdout).
BENCH_DEPTHS=1,4,16 (the default) picks the depths; a depth given more than once is measured
as that many identical columns (BENCH_DEPTHS=1,1,1: the flatness figure's own noise floor).
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
WARMUP = int(os.environ.get("BENCH_WARMUP", "2"))
PYTHON_MODE = os.environ.get("BENCH_PYTHON_MODE") == "1"
DEPTHS = tuple(int(d) for d in os.environ.get("BENCH_DEPTHS", "1,4,16").split(","))
# one column per depth; a depth given twice gets two columns ("1", "1#2"): BENCH_DEPTHS=1,1,1
# measures how far from flat the flatness figure reads when nothing differs (its noise floor)
COLS = [(str(d) if DEPTHS[:i].count(d) == 0 else f"{d}#{DEPTHS[:i].count(d) + 1}", d)
        for i, d in enumerate(DEPTHS)]
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


def bootstrap(rounds, stat, n=2000, seed=0):
    """A 95% percentile interval of stat(rounds resampled with replacement)."""
    import random

    rng = random.Random(seed)
    vals = sorted(stat([rounds[rng.randrange(len(rounds))] for _ in rounds]) for _ in range(n))
    return [vals[int(0.025 * n)], vals[int(0.975 * n) - 1]]


def paired(rounds, col, variant, k=0):
    """Median over rounds of each round's ``variant`` capture over the plain capture right
    before it, minus 1 (``k``: 0 wall time, 1 CPU time)."""
    return statistics.median(one[col][variant][k] / one[col]["plain"][k] - 1 for one in rounds)


def flatness(rounds, cols, depths):
    """Per variant: each column's paired overhead over the mean of the columns' (1.0 = exactly
    flat), the largest deviation and its bootstrap interval. ``rounds[i][col][variant][0]`` is
    that capture's wall time (any unit)."""
    def spread(rs, v):
        o = [paired(rs, c, v) for c in cols]
        mean = sum(o) / len(o)
        return [x / mean for x in o]

    flat = {}
    for v, name in (("annotated", "annotations"), ("ops", "with_ops")):
        rel = spread(rounds, v)
        flat[name] = {
            "depths": depths,
            "columns": cols,
            "relative_to_mean": rel,
            "max_deviation": max(abs(x - 1) for x in rel),
            "max_deviation_ci95": bootstrap(
                rounds, lambda rs, v=v: max(abs(x - 1) for x in spread(rs, v))),
        }
    return flat


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    med = statistics.median
    variants = ["plain", "annotated", "ops"] + (["ops_python"] if PYTHON_MODE else [])
    models = {c: warmed(d, x) for c, d in COLS}
    # One memory pool per (depth, variant), kept across its rounds (the previous graph of the
    # variant holds it): no capture pays cudaMalloc for segments that torch.cuda.graph's
    # empty_cache() gave back, the largest source of round-to-round noise.
    pools = {(c, v): torch.cuda.graph_pool_handle() for c, _ in COLS for v in variants}
    graphs = {}
    rounds = []  # per round: {depth: {variant: (wall s, cpu s)}}
    for r in range(WARMUP + REPEATS):
        one = {}
        for c, _ in COLS:
            one[c] = {}
            for v in variants:
                CPU.clear()
                graphs[c, v], t = capture(models[c], x, v != "plain", record_ops=v != "plain"
                                          and v != "annotated",
                                          observer="python" if v == "ops_python" else "native",
                                          pool=pools[c, v])
                one[c][v] = (t, CPU[-1])
        if r >= WARMUP:
            rounds.append(one)
    rows = []
    for c, d in COLS:
        graphscope.clear_kernel_annotations()
        capture(models[c], x, True, pool=pools[c, "annotated"])
        nodes = len(graphscope.get_kernel_annotations())
        rp, ra = replay_ms(graphs[c, "plain"]), replay_ms(graphs[c, "annotated"])

        def series(v, k=0, c=c):
            return [one[c][v][k] for one in rounds]

        plain, annot, ops = series("plain"), series("annotated"), series("ops")
        row = {
            "depth": d,
            "column": c,
            "annotated_nodes": nodes,
            "plain_capture_ms": med(plain) * 1e3,
            "annotated_capture_ms": med(annot) * 1e3,
            "annotated_plus_ops_capture_ms": med(ops) * 1e3,
            "quartiles_ms": {v: [q * 1e3 for q in statistics.quantiles(series(v), n=4)]
                             for v in variants},
            "overhead_ratio": (med(annot) - med(plain)) / med(plain),
            "overhead_ratio_with_ops": (med(ops) - med(plain)) / med(plain),
            # each round's variant over the plain capture right before it, median over rounds
            "paired_overhead_ratio": paired(rounds, c, "annotated"),
            "paired_overhead_ratio_ci95": bootstrap(
                rounds, lambda rs, c=c: paired(rs, c, "annotated")),
            "paired_overhead_ratio_with_ops": paired(rounds, c, "ops"),
            "paired_overhead_ratio_with_ops_ci95": bootstrap(
                rounds, lambda rs, c=c: paired(rs, c, "ops")),
            # the same from the process's CPU time (all threads), less disturbed by a busy host
            "cpu_plain_capture_ms": med(series("plain", 1)) * 1e3,
            "cpu_annotated_capture_ms": med(series("annotated", 1)) * 1e3,
            "paired_cpu_overhead_ratio": paired(rounds, c, "annotated", 1),
            "paired_cpu_overhead_ratio_with_ops": paired(rounds, c, "ops", 1),
            "replay_plain_ms": rp,
            "replay_annotated_ms": ra,
            "replay_ratio": ra / rp,
        }
        if PYTHON_MODE:
            pyops = series("ops_python")
            row["annotated_plus_ops_python_mode_ms"] = med(pyops) * 1e3
            row["overhead_ratio_with_ops_python_mode"] = (med(pyops) - med(plain)) / med(plain)
        rows.append(row)
    graphscope.clear_kernel_annotations()

    flat = flatness(rounds, [c for c, _ in COLS], list(DEPTHS))
    raw = [{col: {v: [round(t * 1e3, 3), round(c * 1e3, 3)] for v, (t, c) in one[col].items()}
            for col, _ in COLS} for one in rounds]
    from graphscope import native

    os.environ.pop("GRAPHSCOPE_OP_OBSERVER", None)
    out = json.dumps({"bench": "annotation_overhead", "blocks": BLOCKS, "repeats": REPEATS,
                      "warmup": WARMUP, "torch": torch.__version__,
                      "op_observer": native.op_observer_why() or "native", "rows": rows,
                      "flatness": flat, "rounds_ms_wall_cpu": raw}, indent=1)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(out)
    print(out)


if __name__ == "__main__":
    main()

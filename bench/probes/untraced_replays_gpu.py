"""Why do untraced replays under ``graphscope run`` read 1.02-1.03x of plain (the ladder bench of
2026-12-02: a GPU-bound loop of 1.5 ms graph replays, plain and ``run`` in
separate processes)? In one process, so the host's and the GPU's speed are the same for every
comparison: the bench_ladder.py decoder's first ``SIZES`` buckets captured on plain graphs;
each graph's replays timed (the loop's wall, synchronized, per graph, ``REPS`` back to back);
then half of the graphs (every other bucket) replayed 3 times under ``native.tracing()``, as
``run``'s tracing window does, and CUPTI detached (``native.cupti_detach()``, as ``run`` does
when the window closes); then every graph's replays timed again, alternating the two halves.

If tracing leaves the graphs it traced slower (the driver keeping their launches instrumented
after the detach), the traced half's after/before ratio is above the untraced half's; if the
whole process is slower after the detach, both are; if neither moves, the bench's 2-3% is the
spread between processes. Prints JSON: per half, the median over graphs of after/before, and
each graph's times. Run 2026-12-02 (docs/results/untraced_replays_2026-12-02.json).

Needs a GPU: ``python3 bench/probes/untraced_replays_gpu.py [SIZES] [REPS]`` (defaults 16, 20).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from bench_ladder import MODEL  # noqa: E402

from graphscope import native  # noqa: E402


def main(n_sizes: int, reps: int) -> None:
    ns: dict = {}
    exec(MODEL, ns)
    model, tokens, sizes = ns["model"], ns["tokens"], ns["SIZES"][:n_sizes]
    native.ensure_loaded()
    graphs = {}
    pool = torch.cuda.graph_pool_handle()
    with torch.inference_mode():
        for bs in sizes:
            model(tokens[:bs])
        torch.cuda.synchronize()
        keep = []
        for bs in reversed(sizes):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                keep.append(model(tokens[:bs]))
            graphs[bs] = g

    def timed(bs: int) -> float:
        g = graphs[bs]
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(reps):
            g.replay()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / reps * 1e3

    for bs in sizes:  # a warm replay each
        timed(bs)
    traced = sizes[::2]
    before = {bs: timed(bs) for bs in sizes}
    with native.tracing():
        for _ in range(3):
            for bs in traced:
                graphs[bs].replay()
        torch.cuda.synchronize()
    why = native.cupti_detach()
    after = {bs: timed(bs) for bs in sizes}
    again = {bs: timed(bs) for bs in reversed(sizes)}  # the other order, for drift

    def half(keys: list[int]) -> dict:
        r = [min(after[k], again[k]) / before[k] for k in keys]
        return {"median_after_over_before": round(statistics.median(r), 4),
                "all": [round(x, 4) for x in r]}

    print(json.dumps({
        "sizes": sizes, "reps": reps, "detach": why or "detached",
        "traced": half(traced), "never_traced": half([b for b in sizes if b not in traced]),
        "before_ms": before, "after_ms": after, "again_ms": again}, indent=1))


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(args[0] if args else 16, args[1] if len(args) > 1 else 20)

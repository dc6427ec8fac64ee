"""Does ``keep_graph=True`` slow later captures? ``graphscope run`` captures every graph with
``keep_graph=True`` (its template is inspected after the loop) and instantiates it right
after ``capture_end``; in one process, plain torch doing the same took 1.08-1.10x the ladder's
capture loop at the median (bench/probes/watch_parts_gpu.py, bench/bench_ladder_parts.py),
the forward inside each capture slower, not the instantiate. Without graphscope, in fresh
processes, bench_ladder.py's 67-bucket loop:

- ``plain``: ``keep_graph=False`` (torch instantiates in ``capture_end`` and destroys the
  template);
- ``keep``: ``keep_graph=True``, ``instantiate()`` right after each capture, every template
  kept alive, as under ``graphscope run``;
- ``plain_after_kept``: a plain loop timed after a whole ladder was captured with
  ``keep_graph=True`` (not timed, its 67 templates alive): whether live templates slow the
  capture of other graphs, or only the graph's own flag matters.

Prints per variant the median loop seconds and the milliseconds per capture in the forward
inside ``torch.cuda.graph``. Needs a GPU: ``python3 bench/probes/keep_graph_gpu.py [ROUNDS]``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_ladder as B  # noqa: E402
from _measure import variant_probe  # noqa: E402

PROBE = r'''
VARIANT = sys.argv[1]
pool = torch.cuda.graph_pool_handle()
held = []


def ladder(keep, timed):
    graphs, body = [], 0.0
    t = time.perf_counter()
    for bs in reversed(SIZES):
        g = torch.cuda.CUDAGraph(keep_graph=keep)
        with torch.cuda.graph(g, pool=pool):
            t1 = time.perf_counter()
            out = model(tokens[:bs])
            body += time.perf_counter() - t1
        if keep:
            g.instantiate()
        graphs.append((g, out))
    torch.cuda.synchronize()
    return graphs, time.perf_counter() - t, body


with torch.inference_mode():
    for bs in SIZES:
        model(tokens[:bs])
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    if VARIANT == "plain_after_kept":
        held, _, _ = ladder(True, False)
    graphs, loop_s, body_s = ladder(VARIANT == "keep", True)
print("RESULT", json.dumps({"loop_s": loop_s, "body_ms": body_s / len(SIZES) * 1e3}))
'''


def main(rounds: int) -> None:
    variant_probe(B.MODEL + PROBE, "keep.py", ("plain", "keep", "plain_after_kept"), rounds,
                  seed=11, digits=4)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)

"""Where ``graphscope run``'s per-capture cost goes once no capture holds CUPTI
(``GRAPHSCOPE_NODE_COUNTS=all``): bench_ladder.py's 67-bucket loop in one process, under the
watch with one piece taken out at a time. Without a CUPTI subscription nothing of graphscope's
is process-wide (bench/probes/process_wide_gpu.py), so in-process variants compare fairly.

Variants, shuffled per round: ``plain``; ``keep`` (``keep_graph=True`` and the instantiate
after, no watch); ``watch`` (the watch as ``graphscope run`` installs it, every capture
counted, ops recorded in the first 2); ``nohooks`` (no module scopes); ``nomarks`` (module
scopes without the meter's time marks); ``nohist`` (no allocator history); ``fakecount``
(node counts noted without asking the driver); ``noops`` (no op records at all); ``walk``
(every node-count note a walk of the graph, ``GRAPHSCOPE_COUNT_DEPS=0``); ``noinspect`` (the
graph not read before ``capture_end``: what that read costs the loop). Prints per
variant the median milliseconds per capture entering ``torch.cuda.graph``, in the forward,
leaving it, and the loop.

Needs a GPU: ``python3 bench/probes/watch_parts_gpu.py [ROUNDS]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["GRAPHSCOPE_NODE_COUNTS"] = "all"

import torch  # noqa: E402
from _measure import shuffled_rounds  # noqa: E402
from bench_ladder import MODEL  # noqa: E402

from graphscope import native  # noqa: E402
from graphscope.capture.config import CaptureConfig  # noqa: E402
from graphscope.capture.run import watch as W  # noqa: E402
from graphscope.capture.run.patch import patch_cuda_graph  # noqa: E402
from graphscope.native import nodecount  # noqa: E402

_ns: dict = {}
exec(MODEL, _ns)
model, tokens, SIZES = _ns["model"], _ns["tokens"], _ns["SIZES"]
REAL_HOOKS = W.module_hooks
REAL_START = nodecount.start
REAL_READ = native.read_capture
_READ: list = []


def _read_once(stream: int, detach_count: bool):
    """The first graph's inspection, read once and returned for every later graph."""
    if not _READ:
        _READ.append(REAL_READ(stream, detach_count))
    elif detach_count:  # the count still stops, and its notes are resolved, as in the read
        nodecount.detach()
    return _READ[0]


def loop(keep: bool = False) -> list[float]:
    pool = torch.cuda.graph_pool_handle()
    graphs = []
    ph = [0.0, 0.0, 0.0, 0.0]
    with torch.inference_mode():
        for bs in SIZES:
            model(tokens[:bs])
        torch.cuda.synchronize()
        t = time.perf_counter()
        for bs in reversed(SIZES):
            g = torch.cuda.CUDAGraph(keep_graph=keep)
            t0 = time.perf_counter()
            with torch.cuda.graph(g, pool=pool):
                t1 = time.perf_counter()
                out = model(tokens[:bs])
                t2 = time.perf_counter()
            if keep:
                g.instantiate()
            t3 = time.perf_counter()
            ph[0] += t1 - t0
            ph[1] += t2 - t1
            ph[2] += t3 - t2
            graphs.append((g, out))
        torch.cuda.synchronize()
        ph[3] = time.perf_counter() - t
    graphs[0][0].replay()  # under the watch, the batch is read here (outside the loop)
    torch.cuda.synchronize()
    del graphs
    torch.cuda.empty_cache()
    return [x / len(SIZES) * 1e3 for x in ph]


def watched(hooks: bool = True, marks: bool = True, hist: bool = True, count: bool = True,
            ops: bool = True, walk: bool = False, inspect: bool = True) -> list[float]:
    if not hooks:
        W.module_hooks = lambda *a, **k: []
    elif not marks:
        W.module_hooks = lambda n, d, f, o, m: REAL_HOOKS(n, d, f, o, None)
    if not count:
        nodecount.start = lambda fake=False, how=0: REAL_START(True, how)
    if walk:
        os.environ[nodecount.DEPS_ENV] = "0"
    if not inspect:
        W.native.read_capture = _read_once
    w = W.GraphWatch(CaptureConfig(mode="run", replays=0, record_ops=ops, op_captures=2))
    w.meter.history = hist
    undo = patch_cuda_graph(w)
    try:
        return loop()
    finally:
        undo()
        w._close_window()
        w._release_batch()
        w.pending.clear()
        W.module_hooks = REAL_HOOKS
        nodecount.start = REAL_START
        os.environ.pop(nodecount.DEPS_ENV, None)
        W.native.read_capture = REAL_READ
        w.meter._stop_history()


def main(rounds: int) -> None:
    native.ensure_loaded()
    variants = {"plain": lambda: loop(), "keep": lambda: loop(keep=True),
                "watch": lambda: watched(), "nohooks": lambda: watched(hooks=False),
                "nomarks": lambda: watched(marks=False), "nohist": lambda: watched(hist=False),
                "fakecount": lambda: watched(count=False), "noops": lambda: watched(ops=False),
                "walk": lambda: watched(walk=True), "noinspect": lambda: watched(inspect=False)}
    res = shuffled_rounds(variants, rounds, seed=5, warm=True)
    base = statistics.median(r[3] for r in res["plain"])
    for k, rs in res.items():
        med = [statistics.median(r[i] for r in rs) for i in range(4)]
        print(f"{k:10s} enter {med[0]:.3f}  forward {med[1]:.3f}  exit {med[2]:.3f}  "
              f"loop {med[3]:.3f} ms/capture  ratio {med[3] / base:.3f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)

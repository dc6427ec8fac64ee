"""Where ``graphscope run``'s per-capture cost goes, measured capture by capture: in one
process, bench_ladder.py's 67-bucket decoder ladder is captured bucket by bucket, each bucket
once plain and once under the watch (and once per variant of it), in an order shuffled per
bucket. Adjacent captures of the same bucket, milliseconds apart, see the same host: their
differences are far steadier than whole loops in separate processes (this host's loops move by
20-30% from process to process).

A plain capture uses the same ``torch.cuda.graph`` on a graph of the C base class
(``torch._C._CUDAGraph``), which the watch does not patch; the watch's module hooks, held for
its batch, are inert in it (one check per module call). Variants of the watched capture:
``watch`` (as ``graphscope run`` installs it: every capture counted, ops in the first 2),
``fakecount`` (the node-count notes do not ask the driver), ``noinspect`` (the graph is not
read before ``capture_end``), ``nohooks`` (``nn.Module.__call__`` put back for that capture:
no module scopes; the class attribute's change costs the next captures' type caches, so this
one is an upper bound). Each phase is timed: ``enter`` (``torch.cuda.graph``'s enter, with
its empty_cache, and ``capture_begin``), ``forward`` (the model's call), ``exit``
(``capture_end``: torch instantiates inside it). For watched captures graphscope's own seconds
are read too: its steps in the patched ``capture_begin``/``capture_end`` and its own time in
the module calls, so what is left (``hidden``) is the program's own work made slower.

Needs a GPU: ``python3 bench/probes/capture_pairs_gpu.py [ROUNDS] [VARIANT ...]``. Prints, per
variant, the median per-capture difference to the plain capture of the same bucket and round
(ms), by phase, and the sum over the 67 buckets of those medians (what a loop would add).
"""

from __future__ import annotations

import gc
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from bench_ladder import MODEL  # noqa: E402

from graphscope import native  # noqa: E402
from graphscope.capture.config import CaptureConfig  # noqa: E402
from graphscope.capture.run import watch as W  # noqa: E402
from graphscope.native import nodecount  # noqa: E402

_ns: dict = {}
exec(MODEL, _ns)
model, tokens, SIZES = _ns["model"], _ns["tokens"], _ns["SIZES"]
REAL_START = nodecount.start
REAL_READ = native.read_capture
_READ: list = []
PlainGraph = type("PlainGraph", (torch._C._CUDAGraph,), {})


def _read_once(stream: int, detach_count: bool):
    if not _READ:
        _READ.append(REAL_READ(stream, detach_count))
    elif detach_count:  # the count still stops, and its notes are resolved, as in the read
        nodecount.detach()
    return _READ[0]


class Variant:
    """What one watched capture changes, set just before it and undone just after."""

    def __init__(self, watch: W.GraphWatch, name: str) -> None:
        self.w, self.name = watch, name
        self.saved_call = None

    def __enter__(self) -> None:
        if self.name == "fakecount":
            nodecount.start = lambda fake=False, how=0: REAL_START(True, how)
        elif self.name == "noinspect":
            W.native.read_capture = _read_once
        elif self.name == "nohooks":
            self.w._hold_batch()  # held (as for every capture) then its __call__ put back
            self.saved_call = torch.nn.Module.__call__
            torch.nn.Module.__call__ = torch.nn.Module._wrapped_call_impl
            self.w._hold_batch = lambda: None  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        nodecount.start = REAL_START
        W.native.read_capture = REAL_READ
        if self.saved_call is not None:
            torch.nn.Module.__call__ = self.saved_call
            del self.w._hold_batch


def capture(g, pool, bs, variant=None, w=None):
    """One capture of bucket ``bs``: (enter, forward, exit, own steps, own calls) in ms."""
    steps0 = w.steps_s if w else 0.0
    calls0 = w.overhead.get("module_calls", 0.0) if w else 0.0
    t0 = time.perf_counter()
    with torch.cuda.graph(g, pool=pool):
        t1 = time.perf_counter()
        out = model(tokens[:bs])
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    steps = (w.steps_s - steps0) if w else 0.0
    calls = (w.overhead.get("module_calls", 0.0) - calls0) if w else 0.0
    return out, [(t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, steps * 1e3, calls * 1e3]


def main(rounds: int, names: list[str]) -> None:
    native.ensure_loaded()
    w = W.GraphWatch(CaptureConfig(mode="run", replays=0, record_ops=True, op_captures=2))
    w.install()
    gc.collect()
    gc.freeze()
    # res[variant][round][bucket] = phases
    res: dict[str, list[list[list[float]]]] = {k: [] for k in ["plain", *names]}
    random.seed(7)
    with torch.inference_mode():
        for bs in SIZES:
            model(tokens[:bs])
        torch.cuda.synchronize()
        for r in range(rounds + 1):  # round 0: the site's first (op) captures, not counted
            keep = []
            pool = torch.cuda.graph_pool_handle()  # one per round: its graphs all go at the end
            for k in res:
                res[k].append([])
            for bs in reversed(SIZES):
                order = ["plain", *names]
                random.shuffle(order)
                for k in order:
                    if k == "plain":
                        g = PlainGraph()
                        out, ph = capture(g, pool, bs)
                        keep.append((g, out))  # a graph freed while its pool is in use breaks it
                    else:
                        g = torch.cuda.CUDAGraph()
                        with Variant(w, k):
                            out, ph = capture(g, pool, bs, k, w)
                        keep.append((g, out))
                    res[k][-1].append(ph)
            torch.cuda.synchronize()
            w.flush()
            del keep
            torch.cuda.empty_cache()
            print(f"round {r}: " + ", ".join(
                f"{k} {sum(sum(p[:3]) for p in res[k][-1]):.0f} ms" for k in res),
                file=sys.stderr, flush=True)
    w.uninstall()
    out = {"rounds": rounds, "buckets": len(SIZES), "variants": {}}
    phases = ["enter", "forward", "exit", "own_steps", "own_calls"]
    for k in names:
        diffs = {p: [] for p in phases}
        per_bucket = {p: [] for p in phases}
        for i in range(len(SIZES)):
            col = {p: [] for p in phases}
            for r in range(1, rounds + 1):
                a, b = res[k][r][i], res["plain"][r][i]
                for j, p in enumerate(phases):
                    d = a[j] - (b[j] if j < 3 else 0.0)
                    col[p].append(d)
                    diffs[p].append(d)
            for p in phases:
                per_bucket[p].append(statistics.median(col[p]))
        loop = {p: round(sum(per_bucket[p]), 2) for p in phases}
        loop["total"] = round(loop["enter"] + loop["forward"] + loop["exit"], 2)
        loop["hidden"] = round(loop["total"] - loop["own_steps"] - loop["own_calls"], 2)
        med = {p: round(statistics.median(diffs[p]), 4) for p in phases}
        out["variants"][k] = {"loop_added_ms": loop, "per_capture_median_ms": med}
    plain_loop = [sum(sum(p[:3]) for p in res["plain"][r]) for r in range(1, rounds + 1)]
    out["plain_loop_ms"] = [round(x, 1) for x in plain_loop]
    plain_phase = {p: round(sum(statistics.median(res["plain"][r][i][j] for r in range(
        1, rounds + 1)) for i in range(len(SIZES))), 1) for j, p in enumerate(phases[:3])}
    out["plain_loop_by_phase_ms"] = plain_phase
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    argv = sys.argv[1:]
    n = int(argv[0]) if argv and argv[0].isdigit() else 5
    main(n, [a for a in argv if not a.isdigit()] or ["watch", "fakecount", "noinspect",
                                                      "nohooks"])

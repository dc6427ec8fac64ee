"""Where ``graphscope run``'s first captures of a site go, on the GPU host: in a fresh process
the bench_ladder.py decoder's ladder is captured under the watch (as ``graphscope run``
installs it), and ``cProfile`` runs from just before the first capture's ``capture_begin`` to
just after the second one's ``capture_end`` (the site's two op captures: their forwards, the
module scopes' first resolution, the op observer, the graph reads and the DOT; torch's own
calls included). The same process then captures the ladder's first two buckets again on graphs
``graphscope run`` does not watch, unprofiled, for the plain figure. cProfile inflates Python
rows; native and driver calls (``{method ...}`` rows) are timed as they run.

Needs a GPU: ``python3 bench/probes/first_profile_gpu.py [TOP]``: each of the first 4
captures' milliseconds (unprofiled, in a second loop of a fresh watch), then the profile's rows
by own time and by cumulative time, the top TOP (default 35).
"""

from __future__ import annotations

import cProfile
import gc
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from bench_ladder import MODEL  # noqa: E402

from graphscope import native  # noqa: E402
from graphscope.capture.config import CaptureConfig  # noqa: E402
from graphscope.capture.run import watch as W  # noqa: E402

_ns: dict = {}
exec(MODEL, _ns)
model, tokens, SIZES = _ns["model"], _ns["tokens"], _ns["SIZES"]


def ladder(n: int, cls: type, prof: cProfile.Profile | None = None) -> list[float]:
    pool = torch.cuda.graph_pool_handle()
    keep, each = [], []
    for i, bs in enumerate(list(reversed(SIZES))[:n]):
        t = time.perf_counter()
        if prof is not None and i == 0:
            prof.enable()
        g = cls()
        with torch.cuda.graph(g, pool=pool):
            keep.append((g, model(tokens[:bs])))
        if prof is not None and i == 1:
            prof.disable()
        each.append(round((time.perf_counter() - t) * 1e3, 2))
    torch.cuda.synchronize()
    del keep
    return each


def main(top: int) -> None:
    native.ensure_loaded()
    gc.collect()
    gc.freeze()
    plain_cls = type("PlainGraph", (torch._C._CUDAGraph,), {})
    with torch.inference_mode():
        for bs in SIZES:
            model(tokens[:bs])
        torch.cuda.synchronize()
        plain = ladder(4, plain_cls)  # the process's first captures, plain
        w = W.GraphWatch(CaptureConfig(mode="run", replays=0, op_captures=2))
        w.install()
        prof = cProfile.Profile()
        profiled = ladder(4, torch.cuda.CUDAGraph, prof)
        w.flush()
        w.uninstall()
        w2 = W.GraphWatch(CaptureConfig(mode="run", replays=0, op_captures=2))
        w2.install()  # a fresh watch: its site's first captures again, unprofiled
        again = ladder(4, torch.cuda.CUDAGraph)
        overhead = {k: round(v * 1e3, 3) for k, v in w2.overhead.items()}
        w2.flush()
        w2.uninstall()
        plain2 = ladder(4, plain_cls)
    print("first 4 captures, ms: plain (first in the process)", plain, "watched, profiled",
          profiled, "watched again (a fresh watch)", again, "plain after", plain2)
    print("the fresh watch's own ms by cause:", overhead)
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(top)
        text = s.getvalue()
        print(text[text.find("   ncalls"):])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 35)

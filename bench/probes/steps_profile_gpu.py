"""Which calls make up ``graphscope run``'s own steps in a capture loop, on the GPU host: the
bench_ladder.py decoder's 67-bucket ladder captured under the watch (as ``graphscope run``
installs it: every capture counted, ops in a site's first 2), with ``cProfile`` switched on
only inside the patched ``capture_begin``/``capture_end`` (graphscope's steps and torch's own
call in them; the model's forward is not profiled). The profiler adds its own cost per Python
call, so what this gives is each call's share, not the loop's wall: the native and driver calls
(``{method ...}`` rows) are timed as they run, the Python rows are inflated. Each round's loop
also reads the module calls' own time and the node-count queries (``capture_overhead_s``).

Needs a GPU: ``python3 bench/probes/steps_profile_gpu.py [ROUNDS] [TOP]``. Prints the rows
by total time per capture (microseconds), the top TOP (default 40).
"""

from __future__ import annotations

import cProfile
import gc
import json
import os
import pstats
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from bench_ladder import MODEL  # noqa: E402

from graphscope import native  # noqa: E402
from graphscope.capture.config import CaptureConfig  # noqa: E402
from graphscope.capture.run import watch as W  # noqa: E402

_ns: dict = {}
exec(MODEL, _ns)
model, tokens, SIZES = _ns["model"], _ns["tokens"], _ns["SIZES"]


def main(rounds: int, top: int) -> None:
    native.ensure_loaded()
    gc.collect()
    gc.freeze()
    prof = cProfile.Profile()
    cls = torch.cuda.CUDAGraph
    captures = 0
    overhead: dict[str, float] = {}
    with torch.inference_mode():
        for bs in SIZES:
            model(tokens[:bs])
        torch.cuda.synchronize()
        w = W.GraphWatch(CaptureConfig(mode="run", replays=0, op_captures=2))
        w.install()
        begin, end = cls.capture_begin, cls.capture_end
        for r in range(rounds + 1):  # round 0: the site's first (op) captures, not profiled

            def capture_begin(self, *a, _f=begin, **k):  # noqa: ANN001
                prof.enable()
                try:
                    return _f(self, *a, **k)
                finally:
                    prof.disable()

            def capture_end(self, _f=end):  # noqa: ANN001
                prof.enable()
                try:
                    return _f(self)
                finally:
                    prof.disable()

            before = dict(w.overhead)

            if r:
                cls.capture_begin, cls.capture_end = capture_begin, capture_end
            pool = torch.cuda.graph_pool_handle()
            keep = []
            for bs in reversed(SIZES):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    keep.append((g, model(tokens[:bs])))
            torch.cuda.synchronize()
            cls.capture_begin, cls.capture_end = begin, end
            if r:
                captures += len(SIZES)
                for k, v in w.overhead.items():
                    overhead[k] = overhead.get(k, 0.0) + v - before.get(k, 0.0)
            w.flush()
            del keep
            torch.cuda.empty_cache()
            print(f"round {r} done", file=sys.stderr, flush=True)
        w.uninstall()
    st = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        where = fn if file == "~" else f"{os.path.basename(file)}:{line}({fn})"
        rows.append((tt, ct, nc, where))
    rows.sort(reverse=True)
    print(json.dumps({"captures": captures, "overhead_us_per_capture": {
        k: round(v / captures * 1e6, 1) for k, v in sorted(overhead.items())}}, indent=1))
    print(f"{'own us/capture':>15} {'cum us/capture':>15} {'calls/capture':>14}  where")
    for tt, ct, nc, where in rows[:top]:
        print(f"{tt / captures * 1e6:15.1f} {ct / captures * 1e6:15.1f} {nc / captures:14.2f}  "
              f"{where}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(args[0] if args else 3, args[1] if len(args) > 1 else 40)

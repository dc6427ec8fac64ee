"""Where an annotated capture's time goes: cProfile of bench_annotation's capture.

python3 bench/probes/profile_annotation.py [depth] [ops]   prints the top functions by own time
of one annotated capture after warm-ups (ops: record_ops=True), and the plain capture's time.
"""

import contextlib
import cProfile
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_annotation as B  # noqa: E402


def phases(model, x, ops, pool):
    """Minimum over 7 captures of each phase of an annotated capture (no profiler)."""
    import graphscope.capture.cuda_graphs as cg
    from graphscope import annotate as ann

    t = {}

    def timed(name, fn):
        def wrap(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                t.setdefault(name, []).append(time.perf_counter() - t0)
        return wrap

    real_session, real_publish = ann.session, ann.publish

    @contextlib.contextmanager
    def session(record_ops=False):
        t0 = time.perf_counter()
        cm = real_session(record_ops)
        recs = cm.__enter__()
        t.setdefault("session enter", []).append(time.perf_counter() - t0)
        try:
            yield recs
        finally:
            t1 = time.perf_counter()
            cm.__exit__(None, None, None)
            t.setdefault("session exit (unsubscribe, records)", []).append(
                time.perf_counter() - t1)

    ann.session, ann.publish = session, timed("publish (rekey, store)", real_publish)
    try:
        for _ in range(7):
            B.capture(model, x, True, record_ops=ops, pool=pool)
    finally:
        ann.session, ann.publish = real_session, real_publish
    for k, v in t.items():
        print(f"  {k}: min {min(v) * 1e3:.2f} ms, median {sorted(v)[len(v) // 2] * 1e3:.2f} ms")
    del cg


def main():
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    ops = len(sys.argv) > 2 and sys.argv[2] == "ops"
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    model = B.warmed(depth, x)
    for _ in range(3):
        B.capture(model, x, False)
        B.capture(model, x, True, record_ops=ops)
    pools = [torch.cuda.graph_pool_handle() for _ in range(2)]
    plain = min(B.capture(model, x, False, pool=pools[0])[1] for _ in range(7))
    annot = min(B.capture(model, x, True, record_ops=ops, pool=pools[1])[1] for _ in range(7))
    print(f"depth {depth} ops {ops}: plain {plain * 1e3:.1f} ms, annotated {annot * 1e3:.1f} ms")
    phases(model, x, ops, pools[1])
    prof = cProfile.Profile()
    prof.enable()
    B.capture(model, x, True, record_ops=ops)
    prof.disable()
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats("graphscope", 30)


if __name__ == "__main__":
    main()

"""Does a real annotated capture answer mark_kernels from the C scope cache? (the overhead target)

python3 bench/probes/scope_cache_hits.py [depth]

Captures bench_annotation's model at the given depth three times with
graphscope.graph(enable_annotations=True) and counts, per capture, the calls mark_kernels makes
into the Python resolver (a miss of the content-keyed cache) and the cache's size; then times
entering and leaving 150 x depth scopes in a tight loop inside and outside a capture session.
"""

import contextlib
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_annotation as B  # noqa: E402

import graphscope  # noqa: E402
from graphscope import annotate as A  # noqa: E402
from graphscope import native  # noqa: E402


def main():
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    x = torch.randn(64, 256, device="cuda")
    model = B.warmed(depth, x)
    calls = []

    def resolve(self, a, parent, backward):  # the sessions' resolver, counted
        calls.append((a, parent, backward))
        return real(self, a, parent, backward)

    real = A.Session.resolve
    A.Session.resolve = resolve  # type: ignore[method-assign]
    pool = torch.cuda.graph_pool_handle()
    for i in range(3):
        calls.clear()
        g, t = B.capture(model, x, True, pool=pool)
        print(f"capture {i}: {t * 1e3:.1f} ms, resolver calls {len(calls)}, "
              f"cache size {native.extension().mark_kernels_cache_size()}")
        if calls[:3]:
            print("  first misses:", [(str(a)[:40], p, b) for a, p, b in calls[:3]])

    def loop():
        for i in range(B.BLOCKS):
            with contextlib.ExitStack() as st:
                for lvl in range(depth):
                    st.enter_context(graphscope.mark_kernels({"name": f"b{i}", f"l{lvl}": lvl}))

    def timed(n=50):
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            loop()
            ts.append(time.perf_counter() - t0)
        return sorted(ts)[n // 2] * 1e3

    inert = timed()
    from graphscope.annotate.session import session

    with session():
        loop()
        live = timed()
    n = B.BLOCKS * depth
    print(f"tight loop, {n} scopes: inert {inert:.3f} ms, in a session {live:.3f} ms, "
          f"+{(live - inert) / n * 1e6:.0f} ns per entry and exit")


if __name__ == "__main__":
    main()

"""Where an annotated capture's exit spends its time, by depth (the overhead target's flatness).

python3 bench/probes/exit_parts.py [depth[,depth...]] [rounds]

bench_annotation's model and step captured with graphscope.graph(enable_annotations=True),
depths interleaved, the annotation map kept between rounds (as bench_annotation does). The
functions of the exit path are wrapped with timers (their own time includes what they call):
the recorder's stop and record decode, the session's exit, publish and its parts. Prints the
median per round of each, in ms, per depth.
"""

import collections
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_annotation as B  # noqa: E402

import graphscope.annotate.publish as PUB  # noqa: E402
import graphscope.annotate.session  # noqa: E402,F401
import graphscope.annotate.store as ST  # noqa: E402
from graphscope.native import recorder  # noqa: E402

S = sys.modules["graphscope.annotate.session"]  # (the package's `session` is a function)

SPENT: collections.Counter = collections.Counter()


def timed(owner, name, label):
    real = getattr(owner, name)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            SPENT[label] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


def main():
    depths = [int(d) for d in (sys.argv[1] if len(sys.argv) > 1 else "1,16").split(",")]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    timed(recorder, "records", "records decode")
    timed(S.Session, "exit", "session exit")
    timed(S, "resolve_accumulation", "resolve_accumulation")
    timed(PUB, "template_annotations", "template_annotations")
    timed(ST.AnnotationStore, "rekey", "rekey")
    timed(ST, "_annotate_live", "_annotate_live")
    import graphscope.annotate as A

    timed(A, "publish", "publish")
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda")
    models = {d: B.warmed(d, x) for d in depths}
    pools = {d: torch.cuda.graph_pool_handle() for d in depths}
    keep = {}
    per = {d: collections.defaultdict(list) for d in depths}
    for r in range(rounds + 2):
        for d in depths:
            SPENT.clear()
            keep[d], t = B.capture(models[d], x, True, pool=pools[d])
            if r >= 2:
                per[d]["capture"].append(t)
                for k, v in SPENT.items():
                    per[d][k].append(v)
    for d in depths:
        print(f"depth {d}: " + ", ".join(
            f"{k} {statistics.median(v) * 1e3:.3f}" for k, v in per[d].items()))


if __name__ == "__main__":
    main()

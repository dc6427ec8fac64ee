"""Where ``graphscope run``'s capture overhead goes in fresh processes (bench_ladder.py's figure of
record runs fresh processes; bench_ladder_parts.py's in-process variants share warm caches and
any process-wide cost with ``plain``). The ladder program, instrumented: per capture, the
seconds entering ``torch.cuda.graph`` (capture_begin and graphscope's window), the forward
inside it and leaving it (capture_end, instantiate, graphscope's window end); the main thread's
CPU seconds over the loop against its wall; a second eager pass over every size before the loop
(a process-wide slowdown shows there); collections during the loop; the first three captures'
milliseconds and the first one's entry, forward and exit. Variants, shuffled per round: plain,
``run`` (default: every grad-off capture counted), ``run`` with CUPTI
in every capture (``GRAPHSCOPE_NODE_COUNTS=0``), ``run --no-ops`` (no op records), ``run``
without the allocator history
(``GRAPHSCOPE_MEMORY_HISTORY=0``). Its run on ecb009e (before node counts) had ``run
--no-ops --depth 0`` without the history in place of the second.
``counts`` as the second argument runs instead every capture counted
(``GRAPHSCOPE_NODE_COUNTS=all``, no CUPTI) with one piece of ``run`` off at a time: ops, module
scopes (``--depth 0``), the allocator history, all three.
Needs a GPU: ``python3 bench/probes/fresh_parts_gpu.py [ROUNDS] [counts]`` (one line per
process, then medians per variant).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_ladder as B  # noqa: E402
from _measure import child_result, shuffled_rounds  # noqa: E402

PROBE = r'''
TRACED, UNTRACED = int(sys.argv[1]), int(sys.argv[2])
import gc
pool = torch.cuda.graph_pool_handle()
graphs, outs = {}, {}
ph = {"enter": [], "body": [], "exit": []}
with torch.inference_mode():
    for bs in SIZES:
        model(tokens[:bs])
    torch.cuda.synchronize()
    t = time.perf_counter()
    for bs in SIZES:  # the second eager pass: process-wide slowdowns show here
        model(tokens[:bs])
    torch.cuda.synchronize()
    eager_s = time.perf_counter() - t
    torch.cuda.empty_cache()
    gc0 = [s["collections"] for s in gc.get_stats()]
    c0, t = time.thread_time(), time.perf_counter()
    for bs in reversed(SIZES):
        g = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        with torch.cuda.graph(g, pool=pool):
            t1 = time.perf_counter()
            outs[bs] = model(tokens[:bs])
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        ph["enter"].append(t1 - t0); ph["body"].append(t2 - t1); ph["exit"].append(t3 - t2)
        graphs[bs] = g
    torch.cuda.synchronize()
    capture_s, cpu_s = time.perf_counter() - t, time.thread_time() - c0
    gcs = [s["collections"] - g0 for s, g0 in zip(gc.get_stats(), gc0)]
for bs in SIZES[:3]:
    graphs[bs].replay()
torch.cuda.synchronize()
med = lambda xs: sorted(xs)[len(xs) // 2] * 1e3
print("RESULT", json.dumps({"capture_s": capture_s, "cpu_s": cpu_s, "eager_s": eager_s,
      "gc": gcs, "first_ms": round((ph["enter"][0] + ph["body"][0] + ph["exit"][0]) * 1e3, 2),
      "first3_ms": [round((ph["enter"][i] + ph["body"][i] + ph["exit"][i]) * 1e3, 2)
                    for i in range(3)],
      "first_phases_ms": [round(ph[k][0] * 1e3, 2) for k in ("enter", "body", "exit")],
      **{k + "_s": sum(v) for k, v in ph.items()},
      **{k + "_med_ms": med(v) for k, v in ph.items()}}))
'''


def main(rounds: int, which: str = "default") -> None:
    d = tempfile.mkdtemp()
    path = os.path.join(d, "ladder.py")
    with open(path, "w") as f:
        f.write(B.MODEL + PROBE)
    run = ["-m", "graphscope", "run", "-o", path + ".run", "--force", "--replays", "3"]
    nohist = {"GRAPHSCOPE_MEMORY_HISTORY": "0"}
    variants = {"plain": ([], {}), "run": (run, {}),
                "run_cupti": (run, {"GRAPHSCOPE_NODE_COUNTS": "0"}),
                "run_noops": (run + ["--no-ops"], {}), "run_nohist": (run, nohist)}
    if which == "counts":  # every capture counted (no CUPTI): what is left, piece by piece
        al = {"GRAPHSCOPE_NODE_COUNTS": "all"}
        variants = {"plain": ([], {}), "all": (run, al),
                    "all_noops": (run + ["--no-ops"], al),
                    "all_depth0": (run + ["--depth", "0"], al),
                    "all_nohist": (run, {**al, **nohist}),
                    "all_min": (run + ["--no-ops", "--depth", "0"], {**al, **nohist})}
    def one(k: str) -> dict | None:
        pre, env = variants[k]
        r = child_result([sys.executable, *pre, path, "3", "20"], env={**os.environ, **env},
                         label=k)
        if r is not None and pre:  # graphscope's own seconds per cause, as the bundle counts
            r["own_s"] = B.ladder_facts(path + ".run")["overhead_by_cause_s"]
        return r

    res = shuffled_rounds({k: (lambda k=k: one(k)) for k in variants}, rounds, seed=7,
                          each=lambda i, k, r: print(i, k, json.dumps(
                              {a: round(b, 4) if isinstance(b, float) else b
                               for a, b in r.items()}), flush=True))
    for k, rs in res.items():
        if rs:
            skip = ("gc", "own_s", "first3_ms", "first_phases_ms")
            keys = [a for a in rs[0] if a not in skip]
            print("MED", k, json.dumps({a: round(statistics.median(r[a] for r in rs), 4)
                                        for a in keys}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3,
         sys.argv[2] if len(sys.argv) > 2 else "default")

"""Does a process capture more slowly after graphscope has used CUPTI in it? The thirteenth
session's bench (``docs/results/bench_ladder_2026-12-01_session13c.json``) timed the ladder on
unwatched graphs before a process's loop and after its replays: in the plain processes the later
loop ran at 0.61-1.02x of the earlier one, in the ``graphscope run`` processes at 0.83-2.23x
(after its traced replays and its batch's read). Kineto tears CUPTI down after a profiling
session (``cuptiFinalize`` at a driver call's exit) for the same reason: an attached CUPTI can
keep costing after its activities are off.

Each variant runs in fresh processes, alternated round by round: the bench's 16-layer decoder
ladder (its first ``SIZES`` buckets) captured plain on graphs of torch's C base class, then one
action, then the same loop twice more. The action:

- ``none``: nothing (the process's own drift);
- ``ids``: ``native.warm_graph_ids()`` (CUPTI loaded and its graph ids read, as ``run``'s install);
- ``trace``: one small graph replayed 3 times under ``native.tracing()`` (activity records on
  and off, as ``run``'s traced replays);
- ``trace_finalize``: the same, then ``cuptiFinalize()`` (CUPTI detached; everything was
  synchronized and flushed first);
- ``subscribe``: one capture under ``native.recording()`` (the resource callbacks subscribed
  and unsubscribed);
- ``history``: one capture with the allocator history on, then off.

Prints JSON: per variant, the median over rounds of each later loop against the first.
Needs a GPU: ``python3 bench/probes/after_trace_gpu.py [ROUNDS] [SIZES] [VARIANT ...]``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys

VARIANTS = ("none", "ids", "trace", "trace_finalize", "subscribe", "history")
HERE = os.path.dirname(os.path.abspath(__file__))


def child(variant: str, n_sizes: int) -> dict:
    """One process: a plain loop, the action, two plain loops."""
    sys.path.insert(0, os.path.dirname(HERE))
    import torch
    from bench_ladder import MODEL, PLAIN_LOOP

    from graphscope import native

    ns: dict = {}
    exec(MODEL + PLAIN_LOOP, ns)
    model, tokens, sizes = ns["model"], ns["tokens"], ns["SIZES"][:n_sizes]

    def loop() -> float:
        return ns["plain_loop"](sizes)

    def small_graph() -> torch.cuda.CUDAGraph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(tokens[:1])
        return g

    with torch.inference_mode():
        for bs in sizes:
            model(tokens[:bs])
        torch.cuda.synchronize()
        first = loop()
        if variant == "ids":
            native.warm_graph_ids()
        elif variant in ("trace", "trace_finalize"):
            g = small_graph()
            with native.tracing():
                for _ in range(3):
                    g.replay()
                torch.cuda.synchronize()
            if variant == "trace_finalize":
                import ctypes

                rc = ctypes.CDLL(native.loaded_cupti_paths()[0]).cuptiFinalize()
                if rc != 0:
                    raise SystemExit(f"cuptiFinalize returned {rc}")
        elif variant == "subscribe":
            with native.recording():
                small_graph()
        elif variant == "history":
            torch.cuda.memory._record_memory_history("all", context=None)
            small_graph()
            torch.cuda.memory._record_memory_history(None)
        torch.cuda.synchronize()
        later = [loop(), loop()]
    return {"first_s": first, "later_s": later}


def main(rounds: int, n_sizes: int, variants: list[str]) -> None:
    res: dict[str, list[dict]] = {v: [] for v in variants}
    rng = random.Random(0)
    for r in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for v in order:
            out = subprocess.run([sys.executable, __file__, "--child", v, str(n_sizes)],
                                 capture_output=True, text=True, check=True).stdout
            res[v].append(json.loads(out.strip().splitlines()[-1]))
        print(f"round {r + 1}: " + ", ".join(
            f"{v} {res[v][-1]['later_s'][0] / res[v][-1]['first_s']:.2f}" for v in variants),
            file=sys.stderr, flush=True)
    summary = {v: {"later_over_first": [round(statistics.median(
        x["later_s"][i] / x["first_s"] for x in res[v]), 3) for i in (0, 1)],
        "first_s_median": round(statistics.median(x["first_s"] for x in res[v]), 4)}
        for v in variants}
    print(json.dumps({"rounds": rounds, "sizes": n_sizes, "variants": summary, "all": res},
                     indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
    else:
        args = [a for a in sys.argv[1:] if not a.startswith("-")]
        nums = [a for a in args if a.isdigit()]
        names = [a for a in args if not a.isdigit()]
        bad = [v for v in names if v not in VARIANTS]
        if bad:
            raise SystemExit(f"unknown variant(s) {bad}: choose from {', '.join(VARIANTS)}")
        main(int(nums[0]) if nums else 3, int(nums[1]) if len(nums) > 1 else 67,
             names or list(VARIANTS))

"""Does a process capture more slowly after graphscope has used CUPTI in it? The ladder bench of
2026-12-01 (``docs/results/bench_ladder_2026-12-01_fewer_steps_unwatched_loops.json``) timed the
ladder on unwatched graphs before a process's loop and after its replays: in the plain processes
the later loop ran at 0.61-1.02x of the earlier one, in the ``graphscope run`` processes at
0.83-2.23x (after its traced replays and its batch's read). Kineto tears CUPTI down after a
profiling session (``cuptiFinalize`` at a driver call's exit) for the same reason: an attached
CUPTI can keep costing after its activities are off.

Each variant runs in fresh processes, alternated round by round: the bench's 16-layer decoder
ladder (its first ``SIZES`` buckets) captured plain on graphs of torch's C base class, then one
action, then the same loop twice more. The action:

- ``none``: nothing (the process's own drift);
- ``ids``: ``native.warm_graph_ids()`` (CUPTI loaded and its graph ids read, as ``run``'s install);
- ``trace``: one small graph replayed 3 times under ``native.tracing()`` (activity records on
  and off, as ``run``'s traced replays);
- ``trace_finalize``: the same, then ``cuptiFinalize()`` called plainly (CUPTI detached;
  everything was synchronized and flushed first);
- ``trace_detach``: the same, then ``native.cupti_detach()`` (finalized at a driver call's exit,
  as graphscope does after a tracing window). This variant also times, after the loops, CUPTI's
  attaching again (a tracing window, a recorder subscription) and checks that the small graph's
  exec id read before the detach still keys its traced records after it;
- ``subscribe``: one capture under ``native.recording()`` (the resource callbacks subscribed
  and unsubscribed);
- ``history``: one capture with the allocator history on, then off.

Prints JSON: per variant, the median over rounds of each later loop against the first, and of
20 eager forwards at batch 1 after the loops against 20 before the action.
Needs a GPU: ``python3 bench/probes/after_trace_gpu.py [ROUNDS] [SIZES] [VARIANT ...]``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time

VARIANTS = ("none", "ids", "trace", "trace_finalize", "trace_detach", "subscribe", "history")
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

    def eager() -> float:  # the same model's eager forwards at batch 1 (kernel launches)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(20):
            model(tokens[:1])
        torch.cuda.synchronize()
        return time.perf_counter() - t

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
        eager_first = eager()
        if variant == "ids":
            native.warm_graph_ids()
        elif variant in ("trace", "trace_finalize", "trace_detach"):
            g = small_graph()
            g_exec = native.exec_id(g.raw_cuda_graph_exec())
            with native.tracing():
                for _ in range(3):
                    g.replay()
                torch.cuda.synchronize()
            if variant == "trace_finalize":
                import ctypes

                rc = ctypes.CDLL(native.loaded_cupti_paths()[0]).cuptiFinalize()
                if rc != 0:
                    raise SystemExit(f"cuptiFinalize returned {rc}")
            elif variant == "trace_detach":
                why = native.cupti_detach()
                if why:
                    raise SystemExit(f"cupti_detach: {why}")
        elif variant == "subscribe":
            with native.recording():
                small_graph()
        elif variant == "history":
            torch.cuda.memory._record_memory_history("all", context=None)
            small_graph()
            torch.cuda.memory._record_memory_history(None)
        torch.cuda.synchronize()
        later = [loop(), loop()]
        out = {"first_s": first, "later_s": later, "eager_first_s": eager_first,
               "eager_later_s": eager()}
        if variant == "trace_detach":  # attaching again, and the ids across the detach
            t = time.perf_counter()
            with native.tracing() as recs:
                g.replay()
                torch.cuda.synchronize()
            out["retrace_s"] = time.perf_counter() - t
            t = time.perf_counter()
            with native.recording():
                pass
            out["resubscribe_s"] = time.perf_counter() - t
            out["exec_id_kept"] = native.exec_id(g.raw_cuda_graph_exec()) == g_exec
            execs = {int(x) >> 32 for r in recs for x in r.graph_node_id.tolist() if x}
            out["records_keyed_by_old_exec_id"] = execs == {g_exec}
    return out


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
        "first_s_median": round(statistics.median(x["first_s"] for x in res[v]), 4),
        "eager_later_over_first": round(statistics.median(
            x["eager_later_s"] / x["eager_first_s"] for x in res[v]), 3)}
        for v in variants}
    for x in res.get("trace_detach", []):
        for k in ("retrace_s", "resubscribe_s", "exec_id_kept", "records_keyed_by_old_exec_id"):
            summary["trace_detach"].setdefault(k, []).append(x[k])
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

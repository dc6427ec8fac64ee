"""What a CUPTI subscription held across a capture loop costs the captures made while its gate is
shut (``graphscope run``'s batch: a site's first captures are recorded by CUPTI, its later
buckets by node counts, and the subscription is held between them, ``native.HeldRecorder``). In one
process, so the host's speed is the same for every variant: the bench_ladder.py decoder's
ladder (its first ``SIZES`` buckets, largest first, one shared pool) captured on plain
``torch.cuda.CUDAGraph`` (no watch installed) under each variant, bucket by bucket (each bucket
captured under every variant back to back, in a shuffled order, each variant into a pool of its
own; a variant set up and torn down outside the timed capture), in each of ``ROUNDS`` rounds
(the H200 host's speed drifts within a process over seconds: a loop per variant did not
compare like with like):

- ``none``: no subscription;
- ``held_on``: subscribed, the recorder's gate shut, CUPTI's callbacks left on (each node created
  and each node instantiate clones is delivered to graphscope's callback, which drops it): how
  the batch held the subscription before the callbacks were disabled between windows;
- ``held_off``: subscribed, the gate shut and the callbacks disabled in CUPTI
  (``recorder_gate(False)``): how it holds it since;
- ``history``: no subscription, the caching allocator's history on as ``graphscope run`` keeps it
  across a batch (``"all"``, no context);
- ``history_lean``: ``"all"`` without the actions graphscope's meter never reads
  (``LEAN_SKIPPED``: ``free_completed``, ``snapshot``, ``oom``; a free is ``free_requested``
  then ``free_completed``, a third of a capture's entries);
- ``history_state``: the history as ``"state"`` (no trace of actions, no context);
- ``history_skip``: ``"all"`` with every action skipped (``skip_actions``, where torch takes it);
- ``tracker``: graphscope's allocator trace tracker open (``graphscope.native._alloctrace``, which
  graphscope's meter uses instead of the history where it is built);
- ``read``: no subscription, the graph read just before ``capture_end`` as ``graphscope run``
  reads it (``native.read_capture``), its own time reported (``read_ms_per_capture``): what the
  loop adds beyond it is what the read leaves slower (torch's instantiate of the graph read).

Prints JSON: per variant, the median loop (ms), the median per-capture ms and, against ``none``
in the same round, the median ratio of loops and added ms per capture with a 90% bootstrap
interval. Needs a GPU: ``python3 bench/probes/held_callbacks_gpu.py [ROUNDS] [SIZES] [VARIANT,...]``
(defaults 6, 67, all; ``none`` is always run).
"""

from __future__ import annotations

import inspect
import json
import os
import random
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from bench_ladder import MODEL  # noqa: E402

from graphscope import native  # noqa: E402

VARIANTS = ("none", "held_on", "held_off", "history", "history_lean", "history_state",
            "history_skip", "tracker", "read")
# every action torch's allocator history records (skip_actions, where torch takes it)
LEAN_SKIPPED = ["free_completed", "snapshot", "oom"]
ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom"]


def interval(xs: list[float], n: int = 2000) -> list[float]:
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return [round(meds[int(0.05 * n)], 4), round(meds[int(0.95 * n) - 1], 4)]


def main(rounds: int, n_sizes: int, only: tuple[str, ...] = ()) -> None:
    ns: dict = {}
    exec(MODEL, ns)
    model, tokens, sizes = ns["model"], ns["tokens"], ns["SIZES"][:n_sizes]
    ext = native.ensure_loaded()
    native.warm_graph_ids()

    read_ms: list[float] = []

    record = torch.cuda.memory._record_memory_history
    skip_ok = "skip_actions" in inspect.signature(record).parameters
    tracker = native.alloc_tracker()
    variants = tuple(v for v in VARIANTS
                     if (v not in ("history_skip", "history_lean") or skip_ok)
                     and (v != "tracker" or tracker is not None)
                     and (not only or v == "none" or v in only))

    # the history variants: (enabled, skip_actions or None)
    histories: dict[str, tuple[Any, Any]] = {
        "history": ("all", None), "history_lean": ("all", LEAN_SKIPPED),
        "history_state": ("state", None), "history_skip": ("all", ACTIONS)}

    def setup(variant: str) -> None:
        if variant in histories:
            enabled, skip = histories[variant]
            extra = {"skip_actions": skip} if skip is not None else {}
            record(enabled, context=None, stacks="python", max_entries=1 << 20,
                   clear_history=True, **extra)
        elif variant == "tracker":
            tracker.start(1 << 20)
        elif variant in ("held_on", "held_off"):
            ext.recorder_start(True)
            ext.recorder_gate(False, 1 if variant == "held_on" else 0)

    def teardown(variant: str) -> None:
        if variant.startswith("history"):
            record(None)
        elif variant == "tracker":
            tracker.take()
        elif variant in ("held_on", "held_off"):
            ext.recorder_stop()

    def capture(bs: int, pool: Any, keep: list, variant: str) -> float:
        """One bucket under ``variant`` (set up and torn down outside the timed part)."""
        setup(variant)
        try:
            torch.cuda.synchronize()
            t = time.perf_counter()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                keep.append((g, model(tokens[:bs])))
                if variant == "read":
                    t_read = time.perf_counter()
                    native.read_capture(torch.cuda.current_stream().cuda_stream, False)
                    read_ms.append((time.perf_counter() - t_read) * 1e3)
            return (time.perf_counter() - t) * 1e3
        finally:
            teardown(variant)

    def ladder(variants: tuple[str, ...], rng: random.Random) -> dict[str, list[float]]:
        """The ladder once per variant, bucket by bucket: each bucket captured under every
        variant back to back (in a shuffled order), each variant into a pool of its own."""
        pools = {v: torch.cuda.graph_pool_handle() for v in variants}
        keep: list = []
        each: dict[str, list[float]] = {v: [] for v in variants}
        for bs in reversed(sizes):
            order = list(variants)
            rng.shuffle(order)
            for v in order:
                each[v].append(capture(bs, pools[v], keep, v))
        torch.cuda.synchronize()
        del keep
        torch.cuda.empty_cache()
        return each

    res: dict[str, list[list[float]]] = {v: [] for v in variants}
    with torch.inference_mode():
        for bs in sizes:
            model(tokens[:bs])
        torch.cuda.synchronize()
        rng = random.Random(1)
        ladder(variants, rng)  # warm-up: torch's and the driver's first-capture costs
        read_ms.clear()
        for r in range(rounds):
            each = ladder(variants, rng)
            for v in variants:
                res[v].append(each[v])
            print(f"round {r}: " + ", ".join(f"{v} {sum(res[v][-1]):.1f}" for v in variants),
                  file=sys.stderr, flush=True)
    out: dict = {"rounds": rounds, "sizes": len(sizes), "torch": torch.__version__,
                 "skip_actions": skip_ok, "tracker": tracker is not None,
                 "tracker_why": native.alloc_tracker_why(), "variants": {}}
    base = [sum(e) for e in res["none"]]
    for v in variants:
        loops = [sum(e) for e in res[v]]
        d: dict = {"loop_ms": round(statistics.median(loops), 2),
                   "loops_ms": [round(x, 1) for x in loops],
                   "per_capture_ms": round(statistics.median(loops) / len(sizes), 3)}
        if v != "none":
            ratios = [a / b for a, b in zip(loops, base)]
            added = [(a - b) / len(sizes) for a, b in zip(loops, base)]
            d.update(ratio=round(statistics.median(ratios), 4), ratio_interval=interval(ratios),
                     added_ms_per_capture=round(statistics.median(added), 4),
                     added_interval=interval(added))
        if v == "read":
            d["read_ms_per_capture"] = round(statistics.median(read_ms), 4)
        out["variants"][v] = d
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(int(a[0]) if a else 6, int(a[1]) if len(a) > 1 else 67,
         tuple(a[2].split(",")) if len(a) > 2 else ())

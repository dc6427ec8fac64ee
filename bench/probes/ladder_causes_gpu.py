"""What each part of ``graphscope run`` adds to a serving ladder's captures, each process
against itself: bench_ladder.py's program (``--no-gc``: the heap frozen, no collection per
capture, as vLLM captures) run in fresh processes under ``graphscope run`` variants, shuffled per
round, each process's loop compared bucket by bucket with its own unwatched ladder just before
it (bench_ladder.in_process_added: the host's speed, which holds for a process or switches
once, is the same for both). Variants: ``run`` (the default), ``nohistory``
(``GRAPHSCOPE_MEMORY_HISTORY=0``: no allocator history across the batch), ``depth0``
(``--depth 0``: only the outermost module scoped), ``noops`` (``--no-ops``: no ops recorded,
in the first captures either), ``plain`` (no graphscope: the control). Prints JSON: per
variant the medians over processes, with 90% intervals.

Needs a GPU: ``python3 bench/probes/ladder_causes_gpu.py ROUNDS [VARIANT...]``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_ladder as B  # noqa: E402

VARIANTS = {
    "plain": (False, (), {}),
    "run": (True, (), {}),
    "nohistory": (True, (), {"GRAPHSCOPE_MEMORY_HISTORY": "0"}),
    "depth0": (True, ("--depth", "0"), {}),
    "noops": (True, ("--no-ops",), {}),
}


def main(rounds: int, names: list[str]) -> None:
    os.environ["LADDER_NO_GC"] = "1"
    rng = random.Random(0)
    res: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ladder.py")
        with open(path, "w") as f:
            f.write(B.PROGRAM)
        for i in range(rounds):
            order = list(names)
            rng.shuffle(order)
            for n in order:
                observed, flags, env = VARIANTS[n]
                res[n].append(B.once(path, observed, 3, 20, *flags, env=env or None))
            print(f"round {i + 1}: " + ", ".join(
                f"{n} {res[n][-1]['capture_s']:.3f} s" for n in names), file=sys.stderr,
                flush=True)
    out = {}
    for n in names:
        got = B.in_process_added(res[n]) or {}
        out[n] = {k: v for k, v in got.items() if not k.endswith("_all")}
        out[n]["later_per_capture_ms_all"] = got.get("later_per_capture_ms_all")
        out[n]["loop_ratio_all"] = got.get("loop_ratio_all")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 4, args[1:] or ["run", "nohistory", "depth0"])

"""Whether CUPTI attached to a process slows its captures even with nothing subscribed or
traced: ``graphscope run`` reads CUPTI's graph ids from its start (``native.warm_graph_ids``,
which attaches CUPTI), so every capture of the program, watched or not, runs with CUPTI attached
until the first tracing window's detach. held_callbacks_gpu.py could not see this: its
``none`` variant runs after warm_graph_ids too.

Each fresh process captures the bench_ladder.py decoder's 67-bucket ladder on unwatched graphs
once as a warm-up, then ``LOOPS`` times more with CUPTI's state switched between loops in the
order detached, attached, attached, detached, detached, ... (each state as often as the other,
as early as late): ``attach`` is ``native.warm_graph_ids()``, ``detach`` is
``native.cupti_detach()``. Variants, in alternating processes:

- ``cupti``: the switches made;
- ``none``: no switch (the control: the same schedule's two labels on one state).

Prints JSON: per variant, each process's median "attached" loop over its median "detached"
loop, and the median of those with a 90% bootstrap interval. Needs a GPU:
``python3 bench/probes/cupti_attached_gpu.py [ROUNDS] [LOOPS]`` (default 3, 8).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_ladder import MODEL, PLAIN_LOOP  # noqa: E402

VARIANTS = ("none", "cupti")
PROGRAM = MODEL + PLAIN_LOOP + r'''
variant, loops = sys.argv[1], int(sys.argv[2])
from graphscope import native
native.ensure_loaded()
loops_by = {"attached": [], "detached": []}
whys = []
with torch.inference_mode():
    for bs in SIZES:
        model(tokens[:bs])
    if variant == "cupti":  # ensure_loaded may have attached it: start detached
        whys.append(native.cupti_detach())
    plain_loop()  # warm-up: torch's and the driver's first-capture costs
    state = "detached"
    for i in range(loops):
        want = "attached" if i % 4 in (1, 2) else "detached"
        if want != state:
            if variant == "cupti":
                why = native.warm_graph_ids() if want == "attached" else native.cupti_detach()
                if why:
                    whys.append(why)
            state = want
        loops_by[state].append(plain_loop())
print("RESULT", json.dumps({"loops": loops_by, "why": [w for w in whys if w]}))
'''


def interval(xs: list[float]) -> list[float]:
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(2000))
    return [round(meds[100], 4), round(meds[1899], 4)]


def main(rounds: int, loops: int) -> None:
    out: dict = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
        for v in order:
            p = subprocess.run([sys.executable, "-c", PROGRAM, v, str(loops)],
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                raise SystemExit(f"{v}: {p.stderr[-2000:]}")
            res = json.loads(next(ln for ln in p.stdout.splitlines()
                                  if ln.startswith("RESULT")).split(" ", 1)[1])
            lp = res["loops"]
            res["ratio"] = statistics.median(lp["attached"]) / statistics.median(lp["detached"])
            out[v].append(res)
            print(f"round {r} {v}: {res['ratio']:.4f} {res['why']}", file=sys.stderr,
                  flush=True)
    summary = {}
    for v in VARIANTS:
        ratios = [x["ratio"] for x in out[v]]
        summary[v] = {"ratio": round(statistics.median(ratios), 4),
                      "interval": interval(ratios), "ratios": [round(x, 4) for x in ratios]}
    print(json.dumps({"summary": summary, "processes": out}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3,
         int(sys.argv[2]) if len(sys.argv) > 2 else 8)

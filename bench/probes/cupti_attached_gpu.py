"""Whether CUPTI attached to a process slows its captures even with nothing subscribed or
traced: ``graphscope run`` reads CUPTI's graph ids from its start (``native.warm_graph_ids``,
which attaches CUPTI), so every capture of the program, watched or not, runs with CUPTI attached
until the first tracing window's detach. held_callbacks_gpu.py could not see this: its
``none`` variant runs after warm_graph_ids too. In fresh processes, one variant each, rounds
alternating: the bench_ladder.py decoder's 67-bucket ladder captured on unwatched graphs three
times, then the variant's action, then three times more:

- ``none``: no action (the control: a process's later loops against its earlier ones);
- ``cupti``: ``native.warm_graph_ids()`` (CUPTI attached, as under ``graphscope run``);
- ``detached``: the same, then ``native.cupti_detach()``.

Prints JSON: per variant, each process's median loop after over its median loop before.
Needs a GPU: ``python3 bench/probes/cupti_attached_gpu.py [ROUNDS]`` (default 3).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_ladder import MODEL, PLAIN_LOOP  # noqa: E402

VARIANTS = ("none", "cupti", "detached")
PROGRAM = MODEL + PLAIN_LOOP + r'''
import statistics
variant = sys.argv[1]
with torch.inference_mode():
    for bs in SIZES:
        model(tokens[:bs])
    plain_loop()  # warm-up: torch's and the driver's first-capture costs
    before = [plain_loop() for _ in range(3)]
    why = ""
    if variant in ("cupti", "detached"):
        from graphscope import native
        why = native.warm_graph_ids()
        if variant == "detached":
            why = why or native.cupti_detach()
    after = [plain_loop() for _ in range(3)]
print("RESULT", json.dumps({"before": before, "after": after, "why": why}))
'''


def main(rounds: int) -> None:
    out: dict = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
        for v in order:
            p = subprocess.run([sys.executable, "-c", PROGRAM, v], capture_output=True,
                               text=True, timeout=300)
            if p.returncode != 0:
                raise SystemExit(f"{v}: {p.stderr[-2000:]}")
            res = json.loads(next(ln for ln in p.stdout.splitlines()
                                  if ln.startswith("RESULT")).split(" ", 1)[1])
            res["ratio"] = statistics.median(res["after"]) / statistics.median(res["before"])
            out[v].append(res)
            print(f"round {r} {v}: {res['ratio']:.3f} {res['why']}", file=sys.stderr,
                  flush=True)
    summary = {v: {"ratio": round(statistics.median(x["ratio"] for x in out[v]), 4),
                   "ratios": [round(x["ratio"], 4) for x in out[v]]} for v in VARIANTS}
    print(json.dumps({"summary": summary, "processes": out}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

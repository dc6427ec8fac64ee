"""Does anything graphscope does to a process slow the program's CUDA work process-wide? In
fresh processes, bench_ladder.py's ladder under ``graphscope run`` also ran its eager warm-up
(before any capture) ~30% slower, and its captures' forward 1.5-2x; in one process
(bench_ladder_parts.py) ``plain`` shares whatever the process has, and the watch looked cheap.
Here each condition is a fresh process doing more of what ``graphscope run`` does, then timing
(min of 5) launch-bound eager work (allocating elementwise ops) and a raw capture of the same
ops (``torch._C._CUDAGraph``, past graphscope's patched class), per op:

  plain     nothing of graphscope
  import    ``import graphscope.cli`` (every module ``graphscope run`` imports)
  loaded    and ``native.ensure_loaded()`` (libcuda, libcupti opened)
  watch     and ``GraphWatch.install()`` (op observer loaded, profiler watch, patches)
  cupti     and one recorder subscribe/unsubscribe before timing (CUPTI initialised)
  held      and the recorder's subscription held, gate shut, while timing
  window    and a recorder window open (gate open) while timing
  history   plain, with the allocator history ``graphscope run`` keeps across a batch on
  ids       loaded, and CUPTI's graph ids read once (``native.warm_graph_ids()``, which
            ``GraphWatch.install()`` does) and no more

Needs a GPU: ``python3 bench/probes/process_wide_gpu.py [ROUNDS] [CONDITION...]`` (default:
every condition).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys

CHILD = r'''
import contextlib, json, sys, time
import torch
cond = sys.argv[1]
x0 = torch.ones(256, device="cuda")
N = 2000
steps = ["import", "loaded", "watch", "cupti", "held", "window"]
upto = steps.index(cond) + 1 if cond in steps else 0
hold = contextlib.ExitStack()
if upto >= 1:
    import graphscope.cli  # noqa: F401
    from graphscope import native
if upto >= 2:
    native.ensure_loaded()
if upto >= 3:
    from graphscope.capture.run import GraphWatch
    from graphscope.capture.config import CaptureConfig
    GraphWatch(CaptureConfig(mode="run", replays=0)).install()
if upto >= 4:
    with native.recording():
        pass
if upto == 5:
    with native.HeldRecorder().window():
        pass  # held from here on, its gate shut
if upto == 6:
    hold.enter_context(native.recording())
if cond == "ids":
    import graphscope.cli  # noqa: F401
    from graphscope import native
    native.ensure_loaded()
    assert native.warm_graph_ids() == ""
if cond == "history":
    torch.cuda.memory._record_memory_history("all", context=None, stacks="python",
                                             max_entries=100000)

def work():
    x = x0
    for _ in range(N):
        x = x * 1.0001 + 1.0
    return x

def eager():
    torch.cuda.synchronize()
    t = time.perf_counter()
    work()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / (2 * N) * 1e6

s = torch.cuda.Stream()
def capture():
    g = torch._C._CUDAGraph()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        t = time.perf_counter()
        g.capture_begin(None, "global")
        work()
        g.capture_end()
        d = time.perf_counter() - t
    torch.cuda.synchronize()
    return d / (2 * N) * 1e6, g

eager(); capture()
e = min(eager() for _ in range(5))
keep = []
cs = []
for _ in range(5):
    c, g = capture()
    cs.append(c)
    keep.append(g)
print("RESULT", json.dumps({"eager_us": e, "capture_us": min(cs)}))
'''

CONDS = ["plain", "import", "loaded", "watch", "cupti", "held", "window", "history", "ids"]


def main(rounds: int, conds: list[str]) -> None:
    res: dict[str, list[dict]] = {c: [] for c in conds}
    random.seed(3)
    for i in range(rounds):
        order = conds[:]
        random.shuffle(order)
        for c in order:
            out = subprocess.run([sys.executable, "-c", CHILD, c], capture_output=True,
                                 text=True, env=dict(os.environ))
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")]
            if not line:
                print(c, "FAILED", out.stderr[-1500:], flush=True)
                continue
            r = json.loads(line[0].split(" ", 1)[1])
            res[c].append(r)
            print(i, c, json.dumps({k: round(v, 3) for k, v in r.items()}), flush=True)
    base = {k: min(r[k] for r in res["plain"]) for k in ("eager_us", "capture_us")}
    for c, rs in res.items():
        if rs:
            mins = {k: min(r[k] for r in rs) for k in base}
            print("MIN", c, json.dumps({**{k: round(v, 3) for k, v in mins.items()},
                                        **{k + "_x": round(mins[k] / base[k], 3) for k in base},
                                        "eager_med": round(statistics.median(
                                            r["eager_us"] for r in rs), 3)}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2:] or CONDS)

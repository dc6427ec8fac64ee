"""Which part of ``graphscope run`` slows bench_ladder.py's capture loop, in fresh processes
(what the bench measures), by wall and by the loop's own CPU time (``time.thread_time()``: a
co-tenant of the host adds wall, not the thread's CPU seconds). Variants, shuffled per round:

  plain     the program alone
  warm      the program after ``native.ensure_loaded()`` and ``native.warm_graph_ids()`` (libcuda
            and CUPTI opened, CUPTI's graph ids read once: what ``GraphWatch.install`` does)
  run       ``graphscope run`` (the default: ops in the first 2 captures)
  noops     ``graphscope run --no-ops``
  depth0    ``graphscope run --depth 0`` (the outermost module's scope only)
  nohist    ``graphscope run`` with ``GRAPHSCOPE_MEMORY_HISTORY=0``

Prints each process's figures, then per variant the median and the fastest loop (wall and CPU)
and their ratios to plain's. Needs a GPU:
``python3 bench/probes/ladder_variants_gpu.py [ROUNDS] [VARIANT...]``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_ladder import PROGRAM  # noqa: E402

WARM = ("import runpy, sys; from graphscope import native; native.ensure_loaded(); "
        "native.warm_graph_ids(); sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')")


def command(variant: str, path: str) -> tuple[list[str], dict[str, str]]:
    args = [path, "3", "20"]
    if variant == "plain":
        return [sys.executable, *args], {}
    if variant == "warm":
        return [sys.executable, "-c", WARM, *args], {}
    run = [sys.executable, "-m", "graphscope", "run", "-o", path + "." + variant, "--force",
           "--replays", "3"]
    flags = {"run": [], "noops": ["--no-ops"], "depth0": ["--depth", "0"], "nohist": []}[variant]
    env = {"GRAPHSCOPE_MEMORY_HISTORY": "0"} if variant == "nohist" else {}
    return [*run, *flags, *args], env


def once(variant: str, path: str) -> dict:
    cmd, env = command(variant, path)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
    return json.loads(line.split(" ", 1)[1])


def main(rounds: int, variants: list[str]) -> None:
    rng = random.Random(7)
    res: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ladder.py")
        with open(path, "w") as f:
            f.write(PROGRAM)
        for i in range(rounds):
            order = list(variants)
            rng.shuffle(order)
            for v in order:
                r = once(v, path)
                res[v].append(r)
                print(f"{i} {v:7s} wall {r['capture_s']:.3f} s  cpu {r['capture_cpu_s']:.3f} s  "
                      f"first {r['first_capture_s'] * 1e3:.1f} ms", flush=True)
    base = res.get("plain") or res[variants[0]]
    pw = min(r["capture_s"] for r in base)
    pc = min(r["capture_cpu_s"] for r in base)
    pmw = statistics.median(r["capture_s"] for r in base)
    pmc = statistics.median(r["capture_cpu_s"] for r in base)
    for v, rs in res.items():
        mw = statistics.median(r["capture_s"] for r in rs)
        mc = statistics.median(r["capture_cpu_s"] for r in rs)
        fw = min(r["capture_s"] for r in rs)
        fc = min(r["capture_cpu_s"] for r in rs)
        print("SUMMARY", v, json.dumps({
            "median_wall_s": round(mw, 4), "median_cpu_s": round(mc, 4),
            "min_wall_s": round(fw, 4), "min_cpu_s": round(fc, 4),
            "median_wall_x": round(mw / pmw, 3), "median_cpu_x": round(mc / pmc, 3),
            "min_wall_x": round(fw / pw, 3), "min_cpu_x": round(fc / pc, 3),
            "first_ms": round(statistics.median(r["first_capture_s"] for r in rs) * 1e3, 2)}),
            flush=True)


if __name__ == "__main__":
    argv = sys.argv[1:]
    n = int(argv[0]) if argv and argv[0].isdigit() else 5
    names = [a for a in argv if not a.isdigit()] or ["plain", "warm", "run", "noops", "depth0",
                                                     "nohist"]
    main(n, names)

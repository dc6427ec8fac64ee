"""Cost of ``graphscope run`` on a serving engine's capture: a 16-layer decoder's bucket ladder
(vLLM's 67 default sizes: 1, 2, 4, then 8..512 by 8) captured largest first into one shared
memory pool, as vLLM does. The program times its own capture loop, its first replays (the ones
``graphscope run`` traces) and the replays after them (untraced, at plain speed), plain and under
``graphscope run`` (ops recorded in the first 2 buckets, the default) and ``graphscope run
--op-captures all`` (ops in every bucket), in alternating fresh processes of one bench run
(paired rounds; the order of the variants reversed every other round). Prints JSON; the
figures go to docs/benchmarks.md. Needs a GPU: ``python bench/bench_ladder.py [ROUNDS]
[--no-all-ops] [--counts-learned] [--walk-counts] [--no-gc]`` (``--no-all-ops``: plain and
``run`` only, twice the rounds in the same time; ``--counts-learned``: and ``run`` with
``GRAPHSCOPE_NODE_COUNTS=learned`` in each round, the ladder's first 2 captures recorded by
CUPTI, the node counts' way before they became the default for captures begun with grad off;
``--walk-counts``: and ``run`` with ``GRAPHSCOPE_COUNT_DEPS=0``, every node-count note a walk of
the graph, as in the walk-only code; ``--no-gc``: every variant's program freezes its heap
and takes the collection out of its captures, as vLLM does (torch.cuda.graph collects at each
capture's start; ``graphscope run`` freezes the heap it finds before a program, which speeds
that collection: in a program that does neither, plain against ``run`` is not graphscope's cost
alone); ``--cpus=8-11``: every process on those CPUs, so that
the two processes of a pair are not placed on CPUs of different speed: on the H200 host a
process's captures ran at ~3.5 ms or ~5.8 ms each, by process). Each process also reports its
loop's CPU time (``capture_cpu_s``) and the host's stolen CPU seconds while it ran
(``host_steal_s``), each capture's milliseconds (``each_capture_ms``: the JSON's
``added_by_position_ms`` sums what ``run`` added to the first, the op and the other captures)
and the same ladder captured plain in the same process, before its loop and after its replays,
on graphs of torch's C base class that ``graphscope run`` does not watch (``plain_loops_s``:
the JSON's ``capture_ratio_in_process`` divides each loop by its process's own plain loop
before it, so that a pair whose processes ran at different host speeds compares like with like,
and ``later_plain_loop_ratio`` compares each process's two plain loops; a Python
timing of host work, tried first, did not follow the capture speed; the loop before is the
process's second unwatched ladder, the first being a warm-up that pays torch's first-capture
costs, and ``in_process_added`` compares each capture of a process's loop with the same
bucket in it, plain's processes being the control); each median ratio comes
with a 90% bootstrap interval (``*_interval``); the bundle's facts give graphscope's own
seconds in the loop (by cause, and ``capture_steps_s``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

# the decoder and its inputs (bench_ladder_parts.py runs the same)
MODEL = r'''
import json, os, sys, time, torch
from torch import nn
import torch.nn.functional as F

LAYERS, HIDDEN, HEADS, CTX = 16, 1024, 8, 128
SIZES = [1, 2, 4] + list(range(8, 513, 8))  # vLLM's default capture sizes: 67
D = HIDDEN // HEADS


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.qkv, self.out = nn.Linear(HIDDEN, 3 * HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(),
                                 nn.Linear(4 * HIDDEN, HIDDEN))
        shape = (max(SIZES), HEADS, CTX, D)
        # made on the GPU: 2 x 64 MiB per layer of CPU randn took a minute per process
        self.register_buffer("k", torch.randn(shape, dtype=torch.float16, device="cuda"))
        self.register_buffer("v", torch.randn(shape, dtype=torch.float16, device="cuda"))

    def forward(self, x):
        b = x.shape[0]
        q = self.qkv(self.ln1(x))[:, :HIDDEN].view(b, HEADS, 1, D)
        a = F.scaled_dot_product_attention(q, self.k[:b], self.v[:b])
        x = x + self.out(a.reshape(b, HIDDEN))
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(32000, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.head = nn.Linear(HIDDEN, 32000)

    def forward(self, tok):
        x = self.embed(tok)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


with torch.device("cuda"):  # weights initialised on the GPU: seconds less per process
    model = Decoder().half().eval()
tokens = torch.zeros(max(SIZES), dtype=torch.long, device="cuda")
'''

# the ladder captured plain on unwatched graphs (bench/probes/after_trace_gpu.py runs it too)
PLAIN_LOOP = r'''
PlainGraph = type("PlainGraph", (torch._C._CUDAGraph,), {})  # graphscope run watches not it


def plain_loop(sizes=SIZES, each=None):
    """The same ladder captured on graphs of the C base class, which ``graphscope run`` does
    not watch, in a pool of its own, timed and freed: this process's own plain capture speed
    (the H200's host ran a process's captures at one of two speeds, process by process). Run
    outside the program's batch of watched captures, so no hook of graphscope's is in it.
    ``each``: a list that gets each capture's milliseconds."""
    cpool = torch.cuda.graph_pool_handle()
    keep = []
    torch.cuda.synchronize()
    t = time.perf_counter()
    for bs in reversed(sizes):
        t_each = time.perf_counter()
        g = PlainGraph()
        with torch.cuda.graph(g, pool=cpool):
            keep.append((g, model(tokens[:bs])))
        if each is not None:
            each.append((time.perf_counter() - t_each) * 1e3)
    torch.cuda.synchronize()
    s = time.perf_counter() - t
    del keep
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return s
'''

PROGRAM = MODEL + PLAIN_LOOP + r'''
TRACED, UNTRACED = int(sys.argv[1]), int(sys.argv[2])
if os.environ.get("LADDER_NO_GC") == "1":  # as vLLM captures: no collection per capture
    import gc
    gc.collect()
    gc.freeze()
    gc.collect = lambda *a, **k: 0  # torch.cuda.graph collects at each capture's start


pool = torch.cuda.graph_pool_handle()
graphs, outs = {}, {}
with torch.inference_mode():
    for bs in SIZES:  # eager warm-up of every size, outside the timed capture
        model(tokens[:bs])
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    # the process's first capture loop pays torch's and the driver's first-capture costs: a
    # warm-up, not the reference; the loop just before the program's is
    warm_s = plain_loop()
    ref_each = []
    calib0 = plain_loop(each=ref_each)
    reserved0 = torch.cuda.memory_reserved()
    t, cpu = time.perf_counter(), time.thread_time()
    first_s = None
    each = []  # each capture's milliseconds, in the loop's order
    for bs in reversed(SIZES):  # largest first: smaller buckets reuse its memory
        t_each = time.perf_counter()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            outs[bs] = model(tokens[:bs])
        graphs[bs] = g
        each.append((time.perf_counter() - t_each) * 1e3)
        first_s = time.perf_counter() - t if first_s is None else first_s
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - t
    capture_cpu_s = time.thread_time() - cpu  # the loop's CPU time (a co-tenant adds wall only)
    reserved = torch.cuda.memory_reserved() - reserved0


def replays(n):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        for bs in SIZES:
            graphs[bs].replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / max(n * len(SIZES), 1) * 1e3


traced_ms = replays(TRACED)
untraced_ms = replays(UNTRACED)
with torch.inference_mode():
    calib1 = plain_loop()  # after the first replay: graphscope run's batch was read, hooks off
print("RESULT", json.dumps({"capture_s": capture_s, "first_capture_s": first_s,
                            "capture_cpu_s": capture_cpu_s, "each_capture_ms": each,
                            "plain_loops_s": [calib0, calib1], "warm_loop_s": warm_s,
                            "plain_loop_each_ms": ref_each,
                            "graphs": len(graphs),
                            "pool_reserved_bytes": reserved, "traced_replay_ms": traced_ms,
                            "untraced_replay_ms": untraced_ms}))
'''


def steal_s() -> float:
    """The host's stolen CPU seconds so far, all CPUs (/proc/stat; 0 where there is none): a
    virtual machine's CPUs taken by its host show up here, not in a process's CPU time."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


CPUS: set[int] = set()  # --cpus: every process of the bench on these CPUs (empty: any)


def parse_cpus(text: str) -> set[int]:
    """``8-11`` / ``2,4,6``: CPU numbers."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def once(path: str, observed: bool, traced: int, untraced: int, *flags: str,
         env: dict | None = None) -> dict:
    args = [path, str(traced), str(untraced)]
    out_dir = path + ".run" + "".join(f.strip("-").replace("-", "_") for f in flags) + (
        "_env" if env else "")
    cmd = ([sys.executable, "-m", "graphscope", "run", "-o", out_dir, "--force",
            "--replays", str(traced), *flags, *args] if observed else [sys.executable, *args])
    stolen = steal_s()
    pin = (lambda: os.sched_setaffinity(0, CPUS)) if CPUS else None
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}, preexec_fn=pin).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
    return {**json.loads(line.split(" ", 1)[1]), "host_steal_s": round(steal_s() - stolen, 3)}


def ladder_facts(bundle: str) -> dict:
    """What the bundle says about the ladder: graphscope's own seconds by cause (CUPTI
    subscribe/unsubscribe, hooks, inspection, DOT, the meter, publishing), pools, their union,
    capture cost."""
    from graphscope.analysis.memory import memory_summary
    from graphscope.model.bundle_io import read_bundle

    b = read_bundle(bundle)
    mem = memory_summary(b) or {}
    return {"overhead_by_cause_s": b.manifest.get("capture_overhead_s"),
            # all of graphscope's seconds in the patched capture_begin/capture_end
            "capture_steps_s": b.manifest.get("capture_steps_s"),
            "read_after_loop_s": b.manifest.get("read_overhead_s"),
            # the tracing windows and CUPTI's detach after them
            "tracing_windows": b.manifest.get("tracing_windows"),
            "pools": len(mem.get("pools", [])),
            "total_reserved_bytes": mem.get("total_reserved_bytes"),
            "capture_s": mem.get("capture_s"), "instantiate_s": mem.get("instantiate_s")}


def added_by_position(plain: list[dict], run: list[dict], op_captures: int = 2) -> dict:
    """What ``run`` added to each capture of the loop (the median over paired rounds of its
    milliseconds minus plain's at the same position), summed: the first capture, the other op
    captures, the rest (and the rest's median per capture)."""
    pairs = [(p["each_capture_ms"], r["each_capture_ms"]) for p, r in zip(plain, run)
             if p.get("each_capture_ms") and r.get("each_capture_ms")]
    if not pairs:
        return {}
    n = min(len(p) for p, _ in pairs)
    added = [statistics.median(r[i] - p[i] for p, r in pairs) for i in range(n)]
    rest = added[op_captures:]
    return {"first": round(added[0], 2), "op_captures_after_first": round(
        sum(added[1:op_captures]), 2), "rest": round(sum(rest), 2),
        "rest_per_capture": round(statistics.median(rest), 3) if rest else None,
        "plain_rest_per_capture": round(statistics.median(
            statistics.median(p[i] for p, _ in pairs) for i in range(op_captures, n)), 3)}


def median_interval(values: list[float], level: float = 0.9, draws: int = 2000,
                    seed: int = 0) -> list[float] | None:
    """A bootstrap interval of the median of ``values`` (``level`` of the resampled medians,
    a fixed seed): how far the host's noise leaves the median of a handful of paired rounds.
    None for fewer than 3 values."""
    import random

    if len(values) < 3:
        return None
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    lo = meds[int((1 - level) / 2 * (draws - 1))]
    hi = meds[int((1 + level) / 2 * (draws - 1))]
    return [round(lo, 3), round(hi, 3)]


def in_process_ratios(plain: list[dict], run: list[dict]) -> list[float]:
    """Each pair's ratio with each process's loop divided by its own plain loop before it
    (``plain_loops_s[0]``: the ladder on unwatched graphs in the same process, just before):
    a pair whose two processes ran at different host speeds compares like with like. Not the
    loop after the replays: before graphscope detached CUPTI after its tracing windows, ``run``
    processes captured slower after their traced replays (bench/probes/after_trace_gpu.py).
    Where the program collects at each capture (torch's default), the loop before is faster
    in ``run`` processes (graphscope freezes the heap it finds, which speeds each collection):
    this ratio then leaves out that gain and reads graphscope's own cost, higher than the
    program's wall ratio. Pairs without the loop are left out."""
    out = []
    for p, r in zip(plain, run):
        cp, cr = p.get("plain_loops_s"), r.get("plain_loops_s")
        if cp and cr and cp[0] > 0 and cr[0] > 0:
            out.append((r["capture_s"] / cr[0]) / (p["capture_s"] / cp[0]))
    return out


def in_process_added(xs: list[dict], op_captures: int = 2) -> dict | None:
    """Within each process, each capture of the program's loop against the same bucket's
    capture in the process's own unwatched loop just before it (``plain_loop_each_ms``; the
    host's speed, which held for a process or switched once, is the same for both): per
    process, the loop against that loop, the first capture's added milliseconds, the other op
    captures', and the median over the later buckets; then the median over processes of each,
    with a 90% bootstrap interval. For plain processes it is the control: ~1.0x and ~0 ms
    where the loop before is a fair reference. None without the per-capture times."""
    rows = []
    for x in xs:
        loop, ref = x.get("each_capture_ms"), x.get("plain_loop_each_ms")
        if not loop or not ref or len(loop) != len(ref) or len(loop) <= op_captures:
            continue
        d = [a - b for a, b in zip(loop, ref)]
        rows.append({"loop_ratio": sum(loop) / sum(ref), "first_ms": d[0],
                     "op_captures_after_first_ms": sum(d[1:op_captures]),
                     "later_per_capture_ms": statistics.median(d[op_captures:]),
                     "later_ratio": (statistics.median(loop[op_captures:])
                                     / statistics.median(ref[op_captures:]))})
    if not rows:
        return None
    out: dict = {"processes": len(rows)}
    for k in rows[0]:
        vals = [r[k] for r in rows]
        out[k] = round(statistics.median(vals), 3)
        out[k + "_interval"] = median_interval(vals)
        out[k + "_all"] = [round(v, 3) for v in vals]
    return out


def main(rounds: int = 3, traced: int = 3, untraced: int = 20, all_ops: bool = True,
         counts_learned: bool = False, walk: bool = False, no_gc: bool = False) -> None:
    if no_gc:
        os.environ["LADDER_NO_GC"] = "1"  # every variant's program
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ladder.py")
        with open(path, "w") as f:
            f.write(PROGRAM)
        res: dict[str, list[dict]] = {"plain": [], "run": [], "every": [], "learned": [],
                                      "walk": []}
        variants = {"plain": lambda: once(path, False, traced, untraced),
                    "run": lambda: once(path, True, traced, untraced)}
        if all_ops:
            variants["every"] = lambda: once(path, True, traced, untraced,
                                             "--op-captures", "all")
        if counts_learned:
            variants["learned"] = lambda: once(path, True, traced, untraced,
                                               env={"GRAPHSCOPE_NODE_COUNTS": "learned"})
        if walk:
            variants["walk"] = lambda: once(path, True, traced, untraced,
                                            env={"GRAPHSCOPE_COUNT_DEPS": "0"})
        for i in range(rounds):  # paired; every other round in the reverse order
            for k in (list(variants) if i % 2 == 0 else list(reversed(variants))):
                res[k].append(variants[k]())
            print(f"round {i + 1}: " + ", ".join(
                f"{k} {res[k][-1]['capture_s']:.3f} s (steal {res[k][-1]['host_steal_s']} s)"
                for k in variants),
                file=sys.stderr, flush=True)
        plain, run, every, counted = res["plain"], res["run"], res["every"], res["learned"]
        facts = ladder_facts(path + ".run")

    def med(rs: list[dict], k: str) -> float:
        return statistics.median(r[k] for r in rs)

    ratios = [r["capture_s"] / p["capture_s"] for p, r in zip(plain, run)]
    every_ratios = [r["capture_s"] / p["capture_s"] for p, r in zip(plain, every)]
    counted_ratios = [r["capture_s"] / p["capture_s"] for p, r in zip(plain, counted)]
    walk_ratios = [r["capture_s"] / p["capture_s"] for p, r in zip(plain, res["walk"])]
    res = {
        "graphs": plain[0]["graphs"], "rounds": rounds,
        # the program froze its heap and took the collection out of its captures (--no-gc)
        "gc_per_capture": not no_gc,
        # per capture of the loop, the median over rounds of run minus plain, summed: the op
        # captures (the first 2) apart from the rest, the first capture apart from both
        "added_by_position_ms": added_by_position(plain, run),
        "plain_capture_s": med(plain, "capture_s"), "run_capture_s": med(run, "capture_s"),
        "capture_ratio": statistics.median(ratios), "capture_ratio_all": ratios,
        # a 90% bootstrap interval of that median (the host moves single rounds by 0.7-1.6x)
        "capture_ratio_interval": median_interval(ratios),
        # the same with each loop divided by its process's own plain loop before it
        "capture_ratio_in_process": (statistics.median(in_process_ratios(plain, run))
                                     if in_process_ratios(plain, run) else None),
        "capture_ratio_in_process_all": in_process_ratios(plain, run),
        "capture_ratio_in_process_interval": median_interval(in_process_ratios(plain, run)),
        # each process's captures against its own unwatched ladder just before its loop,
        # bucket by bucket (plain's processes: the control)
        "in_process_added": {"plain": in_process_added(plain), "run": in_process_added(run)},
        # the plain loops of run's processes against plain's, before the loop and after the
        # replays: graphscope's effect on captures it does not watch (1.0 but for the host)
        "unwatched_loop_ratio": ([
            statistics.median(r["plain_loops_s"][i] for r in run)
            / statistics.median(p["plain_loops_s"][i] for p in plain) for i in (0, 1)]
            if all(x.get("plain_loops_s") for x in plain + run) else None),
        # each process's plain loop after its replays against the one before its loop
        "later_plain_loop_ratio": {
            k: statistics.median(x["plain_loops_s"][1] / x["plain_loops_s"][0] for x in xs)
            for k, xs in (("plain", plain), ("run", run))
            if xs and all(x.get("plain_loops_s") for x in xs)},
        # the loops' medians against each other (less moved by one noisy process of a pair)
        "capture_ratio_of_medians": med(run, "capture_s") / med(plain, "capture_s"),
        # the fastest loop of each against each other (a noisy host only ever adds time)
        "capture_ratio_of_mins": (min(r["capture_s"] for r in run)
                                  / min(p["capture_s"] for p in plain)),
        "plain_first_capture_ms": med(plain, "first_capture_s") * 1e3,
        "run_first_capture_ms": med(run, "first_capture_s") * 1e3,
        "all_ops_capture_s": med(every, "capture_s") if every else None,
        "all_ops_capture_ratio": statistics.median(every_ratios) if every else None,
        "all_ops_capture_ratio_all": every_ratios,
        "counts_learned_capture_ratio": statistics.median(counted_ratios) if counted else None,
        "counts_learned_capture_ratio_all": counted_ratios,
        "walk_capture_ratio": statistics.median(walk_ratios) if walk_ratios else None,
        "walk_capture_ratio_all": walk_ratios,
        "traced_replays_per_graph": traced,
        "plain_traced_replay_ms": med(plain, "traced_replay_ms"),
        "run_traced_replay_ms": med(run, "traced_replay_ms"),
        "untraced_replay_ratio": med(run, "untraced_replay_ms") / med(plain,
                                                                      "untraced_replay_ms"),
        "plain_untraced_replay_ms": med(plain, "untraced_replay_ms"),
        "run_untraced_replay_ms": med(run, "untraced_replay_ms"),
        "program_pool_reserved_bytes": plain[0]["pool_reserved_bytes"],
        "bundle": facts,
        "plain_all": plain, "run_all": run, "all_ops_all": every, "counts_learned_all": counted,
        "walk_all": res["walk"],
    }
    print(json.dumps(res, indent=1))


if __name__ == "__main__":  # [ROUNDS] [--no-all-ops] [--counts-learned] [--walk-counts]
    # [--no-gc] [--cpus=LIST]
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    for a in sys.argv[1:]:
        if a.startswith("--cpus="):
            CPUS.update(parse_cpus(a.split("=", 1)[1]))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 3, all_ops="--no-all-ops" not in sys.argv,
         counts_learned="--counts-learned" in sys.argv, walk="--walk-counts" in sys.argv,
         no_gc="--no-gc" in sys.argv)

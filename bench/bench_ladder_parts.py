"""Where ``graphscope run``'s capture overhead goes on bench_ladder.py's 67-bucket ladder: the
same capture loop in one process, plain and under the watch with parts of the recording switched
off (no per-op records; no module hooks either), 2-3 loops each, then a cProfile of one loop
under the full watch. Needs a GPU: ``python bench/bench_ladder_parts.py``. In-process loops
after the first share warm caches; bench_ladder.py's fresh processes are the figure of record.
"""

import cProfile
import gc
import io
import json
import pstats
import time

import torch
from bench_ladder import MODEL  # run as python bench/bench_ladder_parts.py

from graphscope.capture.program import watch as W
from graphscope.capture.program import watching
from graphscope.config import CaptureConfig

_ns: dict = {}
exec(MODEL, _ns)  # the bench's own decoder and inputs
model, tokens, SIZES = _ns["model"], _ns["tokens"], _ns["SIZES"]


def loop():
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    with torch.inference_mode():
        for bs in SIZES:
            model(tokens[:bs])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        t = time.perf_counter()
        for bs in reversed(SIZES):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                model(tokens[:bs])
            graphs[bs] = g
        torch.cuda.synchronize()
        s = time.perf_counter() - t
        graphs[1].replay()  # under the watch: the batch is read here, outside the loop
        torch.cuda.synchronize()
    del graphs
    gc.collect()
    torch.cuda.empty_cache()
    return s


results = {}


def measure(name, n=2, hooks=True, **cfgkw):
    if name == "plain":
        ts, over, read = [loop() for _ in range(n)], {}, {}
    else:
        real = W.module_hooks
        if not hooks:
            W.module_hooks = lambda *a, **k: []
        try:
            with watching(CaptureConfig(mode="run", replays=0, **cfgkw)) as watch:
                ts = [loop() for _ in range(n)]
                over, read = dict(watch.overhead), dict(watch.read_overhead)
        finally:
            W.module_hooks = real
    results[name] = {"loop_s": [round(t, 4) for t in ts],
                     "in_loop_s": {k: round(v / n, 4) for k, v in over.items()},
                     "read_after_s": {k: round(v / n, 4) for k, v in read.items()}}
    print(name, json.dumps(results[name]), flush=True)


measure("plain", 3)
measure("run", 3)
measure("run_no_ops", 2, record_ops=False)
measure("run_no_ops_no_module_hooks", 2, hooks=False, record_ops=False)
with watching(CaptureConfig(mode="run", replays=0)):
    loop()
    prof = cProfile.Profile()
    prof.enable()
    loop()
    prof.disable()
s = io.StringIO()
pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
print(s.getvalue())
print("RESULTS", json.dumps(results))

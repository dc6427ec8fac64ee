"""Cost of `capture --counters`: what collecting hardware counters adds.

On one CUDA graph per workload (a bf16 GEMM 8192^3, a multiply over a 1 GiB tensor, 200 tiny
add_ kernels), in this process:
- replay overhead: wall of N replays under PM sampling (20 us interval) over the wall of the
  same N replays plain, measured right before (1.00 = free);
- setup: PM sampling enable + host config image + counter data image sized for the replays
  + set config; decode: decode + evaluate of every sample;
- collect: the whole ``capture.counters.collect`` (setup, N traced and sampled replays,
  decode, attribution onto the graph's nodes), against the N replays' plain wall.
And end to end: ``graphscope capture --counters`` of sample_models/mlp.py, its phases.
Usage: bench_counters.py [OUT.json]  (prints the JSON; needs a GPU)
"""

import json
import os
import sys
import time

from _measure import write_json

N = 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _graphs():
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(256 << 20, device="cuda")
    t = torch.zeros(1024, device="cuda")
    work = {"gemm": lambda: a @ b, "elementwise": lambda: x * 1.5,
            "tiny_graph": lambda: [t.add_(1.0) for _ in range(200)]}
    out = {}
    for name, fn in work.items():
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            fn()  # warm-up on the side stream
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        out[name] = g
    return out


def _wall(replay, n):
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        replay()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main(argv):
    import torch

    from graphscope import native
    from graphscope.analysis.counters import METRICS
    from graphscope.capture.counters import HW_BUFFER_BYTES, INTERVAL_NS, collect, sample_budget
    from graphscope.native import pmsampling

    native.ensure_loaded()
    metrics = [v[0] for v in METRICS.values()]
    res = {"gpu": torch.cuda.get_device_name(), "n_replays": N, "interval_ns": INTERVAL_NS,
           "workloads": {}}
    for name, g in _graphs().items():
        g.replay()
        plain = _wall(g.replay, N)
        budget = sample_budget(int(plain / N * 1e9), N)
        with pmsampling.pm_sampling(metrics, interval_ns=INTERVAL_NS,
                                hw_buffer_bytes=HW_BUFFER_BYTES, max_samples=budget) as pm:
            sampled = _wall(g.replay, N)
        s = pm[0]
        plain2 = _wall(g.replay, N)
        t0 = time.perf_counter()
        data = collect(g.replay, {}, N)
        collect_s = time.perf_counter() - t0
        res["workloads"][name] = {
            "plain_s": round(plain, 5), "sampled_s": round(sampled, 5),
            "plain_after_s": round(plain2, 5),
            "replay_overhead_x": round(sampled / plain, 3),
            "samples": len(s.start_ns), "sample_budget": budget, "overflow": s.overflow,
            "setup_s": round(s.setup_ns / 1e9, 3), "decode_s": round(s.decode_ns / 1e9, 3),
            "collect_s": round(collect_s, 3),
            "collect_over_plain_x": round(collect_s / plain, 1),
            "collect_meta": {k: data[k] for k in ("samples", "setup_s", "decode_s", "collect_s")},
        }
    # end to end, in a fresh process each (CUPTI state is per process)
    import subprocess

    e2e = {}
    for flag in ([], ["--counters"]):
        out = os.path.join("/tmp", "bench-counters-mlp" + ("-c" if flag else ""))
        r = subprocess.run([sys.executable, "-m", "graphscope", "capture",
                            os.path.join(ROOT, "sample_models", "mlp.py"), "--json", "--force",
                            "-o", out, *flag], capture_output=True, text=True, cwd=ROOT)
        if r.returncode:
            e2e["error" + ("_counters" if flag else "")] = r.stderr.strip().splitlines()[-1:]
            continue
        e2e["counters" if flag else "plain"] = json.loads(r.stdout)["phases_s"]
    res["capture_mlp_phases_s"] = e2e
    write_json(argv[1] if len(argv) > 1 else None, res)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""What recording each op call's memory ranges (the false-serialization analysis's input) adds
to an annotated capture with ops, side by side in one process.

Graph: bench_annotation's deep MLP (150 Linear+LayerNorm+GELU blocks, forward+loss+backward,
~2,500 nodes), depth 1. Each round captures, in turn: plain torch.cuda.graph; graphscope.graph
with annotations and ops (native observer) without memory ranges
(GRAPHSCOPE_MEMORY_RANGES=0); the same with them (the default). Reports median capture times
and the paired ratios (each capture over the plain capture of its round). Writes JSON to
argv[1] (default stdout).
"""

import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_annotation as B  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "15"))
WARMUP = 2


def one_round(model, x):
    out = {}
    _, out["plain"] = B.capture(model, x, annotate=False)
    for name, env in (("ops_no_ranges", "0"), ("ops_ranges", "1")):
        os.environ["GRAPHSCOPE_MEMORY_RANGES"] = env
        _, out[name] = B.capture(model, x, annotate=True, record_ops=True)
    return out


def main():
    x = torch.randn(64, 256, device="cuda")
    model = B.warmed(1, x)
    rounds = []
    for i in range(WARMUP + REPEATS):
        r = one_round(model, x)
        if i >= WARMUP:
            rounds.append(r)

    def med(k):
        return statistics.median(r[k] for r in rounds) * 1e3

    def paired(k):
        return statistics.median(r[k] / r["plain"] for r in rounds)

    res = {
        "bench": "memory_ranges", "rounds": REPEATS, "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "capture_ms": {k: med(k) for k in ("plain", "ops_no_ranges", "ops_ranges")},
        "paired_ratio_to_plain": {k: paired(k) for k in ("ops_no_ranges", "ops_ranges")},
        "ranges_over_no_ranges": statistics.median(
            r["ops_ranges"] / r["ops_no_ranges"] for r in rounds),
        "per_round_s": rounds,
    }
    text = json.dumps(res, indent=1)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text)
    print(text if len(sys.argv) == 1 else json.dumps({k: v for k, v in res.items()
                                                      if k != "per_round_s"}, indent=1))


if __name__ == "__main__":
    main()

"""Probe: does a second stream raise a graph node's dependency latency by itself?

Chains of small nodes captured into one graph, on one stream (2K nodes in a row) and as two
concurrent chains of K on two streams, each graph replayed 60 times, timed with CUDA events
(median). Per node: one stream ``T1 / 2K``, two streams ``T2 / K``; ``delta`` is their
difference, what a second stream adds to each node (latency and contention together). Needs a
GPU: ``python bench/probes/two_stream_latency.py OUT.json``.

Run 2026-12-01 on the H200 (docs/benchmarks.md, "two-stream latency"): 0.03-0.24 µs per node,
far below the 0.3-1.0 µs by which the branches sample's node gaps grow on two streams.
"""

import json
import statistics
import sys

import torch
from counters.probe import capture as _capture  # bench/probes/counters/probe.py


def capture(fn):
    """``fn`` warmed up on a side stream, then captured into a graph."""
    return _capture(torch, fn)


def timed(g, reps=60):
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e6)
    return statistics.median(ts)


def chains(pat, a, b, k):
    """(one stream: k of ``pat`` on ``a`` then k on ``b``; two streams: the same side by side)"""
    side = torch.cuda.Stream()

    def one():
        for _ in range(k):
            pat(a)
        for _ in range(k):
            pat(b)

    def two():
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            for _ in range(k):
                pat(b)
        for _ in range(k):
            pat(a)
        main.wait_stream(side)

    return timed(capture(one)), timed(capture(two))


def main(out):
    res = {}
    k = 100
    x, y = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    for label, op in [("tiny_add", lambda t: t.add_(1)),
                      ("sleep_1k", lambda t: torch.cuda._sleep(1000)),
                      ("sleep_10k", lambda t: torch.cuda._sleep(10000))]:
        t1, t2 = chains(op, x, y, k)
        res[label] = {"one_ns": t1, "two_ns": t2, "per_node_one": t1 / (2 * k),
                      "per_node_two": t2 / k, "delta": t2 / k - t1 / (2 * k)}
        print(label, json.dumps({q: round(v, 1) for q, v in res[label].items()}), flush=True)
    k = 64
    a = [torch.zeros(32 * 1024, device="cuda") for _ in range(2)]
    b = [torch.zeros(32 * 1024, device="cuda") for _ in range(2)]
    pats = {
        "memset_add_relu": lambda t: (t[0].zero_(), t[1].add_(t[0]), t[1].relu_()),
        "memset_add": lambda t: (t[0].zero_(), t[1].add_(t[0])),
        "add_relu": lambda t: (t[1].add_(t[0]), t[1].relu_()),
        "memset_only": lambda t: (t[0].zero_(),),
    }
    for label, pat in pats.items():
        per = len(pat(a))
        t1, t2 = chains(pat, a, b, k)
        n = k * per
        res[label] = {"one_ns": t1, "two_ns": t2, "per_node_one": t1 / (2 * n),
                      "per_node_two": t2 / n, "delta": t2 / n - t1 / (2 * n)}
        print(label, json.dumps({q: round(v, 1) for q, v in res[label].items()}), flush=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])

"""Per-op cost of the native op observer (csrc/opwatch.cpp, graphscope.native._opwatch) on CPU.

A stack of small Linear/LayerNorm/GELU/residual-add layers (batch 4, one thread) so every aten
op is cheap; eager forwards are timed with the observer enabled and disabled, alternating, and
the difference is divided by the recorded ops per forward (counted from the observer's log).

    .venv/bin/python bench/probes/opwatch_cost.py [--rounds 30] [--iters 20] [--layers 16]

Prints one line per variant (record_source x record_memory) with the median over rounds of
(enabled - disabled) time per recorded op, in microseconds.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch
from torch import nn

from graphscope import native
from graphscope.annotate import ops as O


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(self.act(self.fc1(self.ln(x))))
        return x + h * 0.5


class Model(nn.Module):
    def __init__(self, layers: int, d: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return x.sum()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--iters", type=int, default=20, help="forwards per timed sample")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--per-forward", type=int, default=0,
                    help="recorded ops per forward (default: counted from the log)")
    ap.add_argument("--no-grad", action="store_true", help="forward under torch.no_grad()")
    ap.add_argument("--variants", default="src+mem,src,mem,none",
                    help="comma list of: src+mem, src, mem, none")
    ap.add_argument("--only", default="", help="run only this variant enabled, forever-ish "
                    "(for perf record): src+mem|src|mem|none|off (never enabled)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    obs = native.op_observer()
    if obs is None:
        raise SystemExit(f"no native op observer: {native.op_observer_why()}")
    set_op = native.extension().set_op_address()
    main_thread = threading.get_ident()
    skip = list(O.default_skip_dirs())
    model = Model(args.layers, args.dim)
    x = torch.randn(4, args.dim)
    grad = torch.enable_grad() if not args.no_grad else torch.no_grad()

    def run(n: int) -> float:
        t0 = time.perf_counter()
        with grad:
            for _ in range(n):
                model(x)
        return time.perf_counter() - t0

    flags = {"src+mem": (True, True), "src": (True, False), "mem": (False, True),
             "none": (False, False)}

    def enable(name: str) -> None:
        src, mem = flags[name]
        obs.enable(set_op, main_thread, skip, record_ops=True, record_source=src,
                   backward=False, record_memory=mem)

    if args.only:
        if args.only == "off":
            run(args.rounds * args.iters)
            return
        enable(args.only)
        try:
            run(args.rounds * args.iters)
        finally:
            obs.disable()
        return

    # recorded ops per forward (from the log)
    obs.set_logging(True)
    enable("src")
    run(1)
    obs.disable()
    per_fwd = args.per_forward or len(obs.log())
    obs.set_logging(False)
    assert obs.errors() == 0

    run(args.iters)  # warm-up
    print(f"torch {torch.__version__}  layers={args.layers} dim={args.dim} "
          f"grad={not args.no_grad}  recorded ops/forward={per_fwd}  "
          f"rounds={args.rounds} x {args.iters} forwards")
    for name in args.variants.split(","):
        enable(name)
        run(args.iters)  # the table and caches warm
        obs.disable()
        on, off = [], []
        for _ in range(args.rounds):
            off.append(run(args.iters))
            enable(name)
            try:
                on.append(run(args.iters))
            finally:
                obs.disable()
        assert obs.errors() == 0
        ops = per_fwd * args.iters
        base = statistics.median(off) / ops * 1e6
        diffs = sorted((a - b) / ops * 1e6 for a, b in zip(on, off))
        med = statistics.median(diffs)
        q1, q3 = diffs[len(diffs) // 4], diffs[3 * len(diffs) // 4]
        print(f"  {name:8s} +{med:5.2f} us/op (IQR {q1:.2f}..{q3:.2f})  off {base:5.2f}  "
              f"on {statistics.median(on) / ops * 1e6:5.2f} us/op  "
              f"on/off {statistics.median(on) / statistics.median(off):.2f}x")


if __name__ == "__main__":
    main()

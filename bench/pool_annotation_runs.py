"""Pool the rounds of several bench_annotation.py runs and recompute the per-depth paired
overheads and the flatness figure over all of them (docs/benchmarks.md, the overhead target).

python3 bench/pool_annotation_runs.py RUN.json [RUN.json ...] [--out POOLED.json]

Each round of bench_annotation is self-contained (every depth and variant captured in turn, each
overhead paired with the plain capture right before it), so rounds of runs of the same code on
the same kind of machine can be resampled together: the bootstrap intervals then rest on all of
them. The runs must have the same columns. Needs no GPU.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_annotation import bootstrap, flatness, paired  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="bench_annotation.py JSON outputs")
    ap.add_argument("--out", help="write the pooled figures here (JSON)")
    a = ap.parse_args(argv)
    rounds, cols, depths = [], None, None
    for path in a.runs:
        with open(path) as f:
            run = json.load(f)
        rs = run.get("rounds_ms_wall_cpu")
        if not rs:
            sys.exit(f"pool_annotation_runs: {path}: no per-round times (rounds_ms_wall_cpu)")
        these = list(rs[0])
        if cols is not None and these != cols:
            sys.exit(f"pool_annotation_runs: {path}: columns {these} differ from {cols}")
        cols = these
        depths = [r["depth"] for r in run["rows"]]
        rounds.extend(rs)
    per = {c: {v: {"paired_overhead_ratio": paired(rounds, c, v),
                   "ci95": bootstrap(rounds, lambda rs, c=c, v=v: paired(rs, c, v))}
               for v in ("annotated", "ops")} for c in cols}
    out = {"runs": a.runs, "rounds": len(rounds), "columns": per,
           "flatness": flatness(rounds, cols, depths)}
    text = json.dumps(out, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()

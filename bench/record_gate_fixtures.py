"""Record the regression-gate fixtures on a GPU: each bundle by its own `graphscope capture`
process, of sample_models/gate_branches.py (about 20 graph nodes, forward mode):

    aa_00 ... aa_NN   the program unchanged, recorded again and again (A/A pairs)
    extra_5pct        one extra kernel in L.left.1 sized to about 5% of the A/A span
    extra_3pct        the same at about 3%
    two_streams       the right branch on a side stream (a real speed-up)
    gates.json        what was recorded: date, GPU, versions, commands, the A/A median span,
                      each extra kernel's size, its measured time and the span it added

Usage (graphscope installed, on the GPU machine):

    python bench/record_gate_fixtures.py OUT [--aa 21] [--replays 30]

then copy OUT to tests/data/gates/ (tests/unit/test_gate_fixtures.py reads it). The extra
kernel is sized in steps: a first size from the A/A span and a memory-bound guess, then
rescaled by the kernel's time measured in the bundle (its node is the one the comparison with
aa_00 finds added), recorded again until within 15% of the target. The script ends with the
gate's verdicts on the pairs the tests check, so a run shows at once whether they hold.
This process imports no torch and never touches the GPU itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join("sample_models", "gate_branches.py")
MODULE = "L.left.1"  # sample_models/gate_branches.py EXTRA_MODULE
MAX_BUNDLE_BYTES = 200_000
GUESS_BYTES_PER_NS = 2_500.0  # a first guess of an elementwise kernel's bandwidth (2.5 TB/s)
TOLERANCE = 0.15
LIMIT_PCT = 3.0  # the gate the tests hold the fixtures to (tests/unit/test_gate_fixtures.py)


def capture(out: str, name: str, entry: str, replays: int,
            elements: Optional[int] = None) -> dict[str, Any]:
    """One `graphscope capture` process; its command line and wall time."""
    path = os.path.join(out, name)
    argv = ["graphscope", "capture", MODEL, "--mode", "forward", "--entry", entry,
            "--replays", str(replays), "-o", path, "--force"]
    env = dict(os.environ)
    if elements is not None:
        env["GATE_EXTRA_ELEMENTS"] = str(elements)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "graphscope", *argv[1:]], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=False, timeout=180)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{name}: graphscope capture exited {r.returncode}:\n{r.stderr[-2000:]}")
    print(f"{name:12s} {wall:5.1f} s", flush=True)
    cmd = " ".join(argv)
    return {"command": f"GATE_EXTRA_ELEMENTS={elements} {cmd}" if elements else cmd,
            "wall_s": round(wall, 2)}


def median_span(path: str) -> float:
    from graphscope.model.bundle_io import read_bundle

    return float(statistics.median(read_bundle(path).replay_span_ns))


def added_kernel_ns(base: str, path: str) -> float:
    """The median time of the kernel ``path`` has in MODULE that ``base`` has not."""
    from graphscope.analysis.gate.explain import kernel_changes
    from graphscope.model.bundle_io import read_bundle

    a, b = read_bundle(base), read_bundle(path)
    added, _, _ = kernel_changes(a.graphs[0], b.graphs[0])
    mine = [k for k in added if k.module == MODULE and k.median_ns]
    if len(mine) != 1:
        sys.exit(f"{path}: expected one kernel added in {MODULE}, found {added}")
    return float(mine[0].median_ns or 0.0)


def record_extra(out: str, name: str, pct: float, span_ns: float, replays: int,
                 base: str, ns_per_element: Optional[float] = None) -> dict[str, Any]:
    """The extra-kernel bundle whose kernel takes about ``pct`` % of ``span_ns``;
    ``ns_per_element``: the kernel's time per float measured before (a first size from it)."""
    target = pct / 100.0 * span_ns
    per = ns_per_element or 8 / GUESS_BYTES_PER_NS  # read + write a float
    elements = max(1024, int(target / per))
    tries = []
    for _ in range(4):
        rec = capture(out, name, "extra_kernel", replays, elements)
        got = added_kernel_ns(base, os.path.join(out, name))
        tries.append({"elements": elements, "kernel_ns": got})
        if abs(got / target - 1.0) <= TOLERANCE:
            break
        elements = max(1024, int(elements * min(max(target / got, 0.25), 4.0)))
    span = median_span(os.path.join(out, name))
    return {**rec, "target_pct": pct, "module": MODULE, "elements": tries[-1]["elements"],
            "ns_per_element": tries[-1]["kernel_ns"] / tries[-1]["elements"],
            "kernel_ns": tries[-1]["kernel_ns"], "tries": tries,
            "kernel_pct_of_aa_span": round(100.0 * tries[-1]["kernel_ns"] / span_ns, 2),
            "span_increase_pct": round(100.0 * (span / span_ns - 1.0), 2)}


def check_sizes(out: str) -> None:
    for name in sorted(os.listdir(out)):
        p = os.path.join(out, name)
        if not os.path.isdir(p):
            continue
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)
        if size > MAX_BUNDLE_BYTES:
            sys.exit(f"{p}: {size} bytes, over {MAX_BUNDLE_BYTES}: make the program smaller")


def self_check(out: str, aa: list[str]) -> None:
    """The gate on the pairs the tests check, printed."""
    from graphscope.analysis.gate import compare
    from graphscope.model.bundle_io import read_bundle

    b = {n: read_bundle(os.path.join(out, n)) for n in [*aa, "extra_5pct", "extra_3pct",
                                                        "two_streams"]}
    worst = []
    for x, y in zip(aa, aa[1:]):
        c = compare(b[x], b[y], limit_pct=LIMIT_PCT)
        s = c.graphs[0].span
        assert s is not None
        worst.append(abs(s.delta_pct or 0.0))
        print(f"A/A {x} {y}: span {s.delta_pct:+.2f}% noise {s.noise_ns:.0f} ns {s.verdict}"
              f"{'  FAILS' if c.failed else ''}")
    print(f"A/A: largest |change| of span {max(worst):.2f}% over {len(worst)} pairs")
    for other in ("extra_5pct", "extra_3pct", "two_streams"):
        res = [compare(b[x], b[other], limit_pct=LIMIT_PCT) for x in aa]
        verdicts = sorted({(c.graphs[0].span.verdict if c.graphs[0].span else "-", c.failed)
                           for c in res})
        pcts = [c.graphs[0].span.delta_pct or 0.0 for c in res if c.graphs[0].span]
        print(f"{other}: span {min(pcts):+.2f}% .. {max(pcts):+.2f}% against the A/A bundles; "
              f"(verdict, failed at {LIMIT_PCT}%): {verdicts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--aa", type=int, default=21, help="A/A bundles (pairs: one fewer)")
    ap.add_argument("--replays", type=int, default=30)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    t0 = time.perf_counter()
    aa = [f"aa_{i:02d}" for i in range(args.aa)]
    recs: dict[str, Any] = {}
    half = len(aa) // 2  # A/A bundles on both sides of the others in time: drift shows
    for name in aa[:half]:
        recs[name] = capture(out, name, "graphscope_model", args.replays)
    span = statistics.median(median_span(os.path.join(out, n)) for n in aa[:half])
    base = os.path.join(out, aa[0])
    extra: dict[str, Any] = {}
    per = None
    for p in (5, 3):  # the 3% kernel sized from the 5% one's measured time per float
        extra[f"extra_{p}pct"] = rec = record_extra(out, f"extra_{p}pct", p, span, args.replays,
                                                    base, per)
        per = rec["ns_per_element"]
    recs["two_streams"] = capture(out, "two_streams", "two_streams", args.replays)
    for name in aa[half:]:
        recs[name] = capture(out, name, "graphscope_model", args.replays)
    check_sizes(out)
    with open(os.path.join(out, aa[0], "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    doc = {"recorded": time.strftime("%Y-%m-%d", time.gmtime()), "gpu":
           manifest.get("versions", {}).get("gpu"), "versions": manifest.get("versions"),
           "model": MODEL, "replays": args.replays, "aa": aa,
           "aa_median_span_ns": span, "module": MODULE, "limit_pct": LIMIT_PCT,
           "captures": recs, "extra": extra, "two_streams": "two_streams",
           "wall_s": round(time.perf_counter() - t0, 1)}
    with open(os.path.join(out, "gates.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps({k: doc[k] for k in ("aa_median_span_ns", "extra", "wall_s")}, indent=1))
    print(f"{len(recs) + sum(len(x['tries']) for x in extra.values())} captures in "
          f"{doc['wall_s']} s")
    self_check(out, aa)


if __name__ == "__main__":
    main()

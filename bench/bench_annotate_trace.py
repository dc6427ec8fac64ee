"""graphscope annotate-trace vs PyTorch 2.14.1's annotator on the same trace, side by side.

Usage: bench_annotate_trace.py OUT.json [--nodes 5000] [--replays 200] [--workdir DIR]
                               [--gen GEN_KINETO_TRACE.py] [--baseline-cli SCRIPT]
Generates the trace with ../shared/bench/gen_kineto_trace.py (1,000,802 events by default),
takes PyTorch's stdlib-only script out of the torch 2.14.1 wheel (not installed), and runs each
tool in its own process on .json and .json.gz, recording wall time and peak RSS. Before each run
the page cache's dirty pages are written back (os.sync), so neither tool pays for writing the
other's output; graphscope runs once before and once after PyTorch and its time is the mean.
``--baseline-cli SCRIPT`` (a script that runs another checkout's graphscope CLI) is measured
the same way, each of its runs right after one of graphscope's: a before/after A/B in one run.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time
import zipfile

from _measure import measure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "..", "shared", "bench", "gen_kineto_trace.py")


def _torch_script(workdir):
    wheels = sorted(glob.glob("/opt/pypi-more/files/torch-2.14.1-*.whl")) or sorted(
        glob.glob(os.environ.get("GRAPHSCOPE_TORCH_WHEEL", "/nonexistent")))
    if not wheels:
        raise SystemExit("torch 2.14.1 wheel not found (set GRAPHSCOPE_TORCH_WHEEL)")
    out = os.path.join(workdir, "torch_annotate_cuda_graph_trace.py")
    with zipfile.ZipFile(wheels[0]) as z:
        with open(out, "wb") as f:
            f.write(z.read("torch/cuda/_annotate_cuda_graph_trace.py"))
    return out


def _synced(measure_fn, cmd):
    """``measure_fn(cmd)`` after writing back dirty pages; None without a command."""
    if not cmd:
        return None
    os.sync()
    return measure_fn(cmd)


def _mean(before, after):
    return {"wall_s": (before["wall_s"] + after["wall_s"]) / 2,
            "peak_rss_mb": max(before["peak_rss_mb"], after["peak_rss_mb"]),
            "before_pytorch": before, "after_pytorch": after}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--replays", type=int, default=200)
    p.add_argument("--workdir", default="/tmp/gs-annotate-bench")
    p.add_argument("--gen", default=GEN, help="the trace generator (shared/bench)")
    p.add_argument("--baseline-cli", default=None,
                   help="another graphscope CLI script, run alternately with this one")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    script = _torch_script(a.workdir)
    gs_cli = os.path.join(ROOT, "graphscope", "__main__.py")
    rows = []
    for gz in (False, True):
        ext = ".json.gz" if gz else ".json"
        trace = os.path.join(a.workdir, "trace" + ext)
        pkl = os.path.join(a.workdir, "annotations.pkl")
        if not os.path.exists(trace):
            subprocess.run([sys.executable, a.gen, trace, pkl, "--nodes", str(a.nodes),
                            "--replays", str(a.replays)] + (["--gz"] if gz else []), check=True)
        size_mb = os.path.getsize(trace) / 2**20
        # graphscope runs before and after PyTorch (the order matters on a VM: the first touch
        # of memory PyTorch's 1.7 GB just gave back is slow), each tool starting with no dirty
        # pages of another run's output still being written back; the time is their mean
        out_ours = os.path.join(a.workdir, "ours" + ext)
        ours_cmd = [gs_cli, "annotate-trace", trace, "-a", pkl, "-f", "-o", out_ours]
        base_cmd = [a.baseline_cli, *ours_cmd[1:]] if a.baseline_cli else None
        os.sync()
        ours_before = measure(ours_cmd)
        base_before = _synced(measure, base_cmd)
        os.sync()
        theirs = measure([script, trace, "-a", pkl, "-o", os.path.join(a.workdir, "theirs" + ext)])
        os.sync()
        ours_after = measure(ours_cmd)
        base_after = _synced(measure, base_cmd)
        ours = _mean(ours_before, ours_after)
        rows.append({"input": ext, "size_mb": round(size_mb, 1), "pytorch": theirs,
                     "graphscope": ours,
                     "speedup": theirs["wall_s"] / ours["wall_s"],
                     "rss_ratio": ours["peak_rss_mb"] / theirs["peak_rss_mb"]})
        if base_cmd:
            rows[-1]["baseline"] = _mean(base_before, base_after)
        print(json.dumps(rows[-1]), flush=True)
    res = {"bench": "annotate_trace", "nodes": a.nodes, "replays": a.replays,
           "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "rows": rows}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

"""Record the bundles that ``make demo``, README's pictures and the HTML screenshot show, with
every feature a default capture records today (launch records, memory ranges for the
stream-order analysis, memory facts), on a GPU box::

    python bench/record_demo_fixtures.py OUTDIR        # OUTDIR=tests/data: the committed ones

Each bundle is made by the command a user types (``graphscope capture``/``run``, run from the
checkout's root so the manifest names ``sample_models/...``), in a process of its own, then
read back and checked: under 600 KB, launches recorded, memory ranges recorded, and (for
``run_compiled_trees``) torch.compile's cudagraph trees seen with a second recording and a
skipped region. Scenarios:

- ``mlp_step``, ``gpt_step``: a training step of sample_models/mlp.py and gpt.py (``make
  demo`` without a GPU, README's first picture, the HTML screenshot);
- ``mlp_step_eager``, ``gpt_step_eager``: the same with ``--eager-baseline``;
- ``branches_forward``: two independent branches on one stream (the Diagnosis and the
  findings pictures);
- ``run_decode``: a decode loop's bucket graphs under ``graphscope run``;
- ``run_compiled_trees``: sample_models/programs/compiled_trees.py under ``graphscope run``
  (reduce-overhead with a second batch size and a skipped in-place helper).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_BYTES = 600 * 1024

# name: the command's arguments after "graphscope" (OUT: the bundle's path)
SCENARIOS: dict[str, list[str]] = {
    "mlp_step": ["capture", "sample_models/mlp.py", "--mode", "step", "-o", "OUT"],
    "mlp_step_eager": ["capture", "sample_models/mlp.py", "--mode", "step", "--eager-baseline",
                       "-o", "OUT"],
    "gpt_step": ["capture", "sample_models/gpt.py", "--mode", "step", "-o", "OUT"],
    "gpt_step_eager": ["capture", "sample_models/gpt.py", "--mode", "step", "--eager-baseline",
                       "-o", "OUT"],
    "branches_forward": ["capture", "sample_models/branches.py", "--mode", "forward",
                         "-o", "OUT"],
    "run_decode": ["run", "-o", "OUT", "sample_models/programs/decode.py"],
    "run_compiled_trees": ["run", "-o", "OUT", "sample_models/programs/compiled_trees.py"],
}


def check(path: str, name: str) -> list[str]:
    """What is wrong with the recorded bundle (empty: nothing), read from ``graphscope report
    --json`` of it."""
    problems = []
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    if size >= MAX_BYTES:
        problems.append(f"{size} bytes, not under {MAX_BYTES}")
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", "--json", path],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        return problems + [f"report --json: {r.stderr.strip()[-500:]}"]
    graphs = json.loads(r.stdout)["diagnosis"]["graphs"]
    launches = sum(1 for g in graphs if g.get("launch_recorded"))
    op_info = sum(1 for g in graphs if (g.get("stream_order") or {}).get("op_info"))
    print(f"{name}: {size} bytes, {len(graphs)} diagnosed graphs, launches in {launches}, "
          f"memory ranges in {op_info}", flush=True)
    if name == "run_compiled_trees":
        t = json.loads(r.stdout).get("cudagraph_trees") or {}
        print(f"{name}: {t.get('recordings')} recordings, skips {t.get('skips')}", flush=True)
        if (t.get("recordings") or 0) < 2 or not t.get("skips"):
            problems.append(f"cudagraph trees: want two recordings and a skip: {t}")
    elif not launches or not op_info:
        problems.append("launches or memory ranges not recorded")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python bench/record_demo_fixtures.py OUTDIR [SCENARIO ...]",
              file=sys.stderr)
        return 2
    out_dir = os.path.abspath(argv[1])
    names = argv[2:] or list(SCENARIOS)
    problems = []
    for name in names:
        path = os.path.join(out_dir, name)
        shutil.rmtree(path, ignore_errors=True)
        cmd = [sys.executable, "-m", "graphscope",
               *[path if a == "OUT" else a for a in SCENARIOS[name]]]
        t = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        print(f"{name}: exit {r.returncode} in {time.perf_counter() - t:.1f} s", flush=True)
        if r.returncode != 0:
            problems.append(f"{name}: {r.stderr.strip()[-1500:]}")
            continue
        problems += [f"{name}: {p}" for p in check(path, name)]
        with open(os.path.join(path, "manifest.json")) as f:  # the command as typed
            print(f"{name}: {' '.join(json.load(f)['command'])}", flush=True)
    for p in problems:
        print("PROBLEM", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

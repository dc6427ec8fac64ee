"""Record the CPU tests' fixtures of ``capture --try-streams`` beyond forward and of
``capture --try-compile``, on a GPU box::

    python bench/record_try_fixtures.py OUTDIR        # OUTDIR=tests/data: the committed ones

Each scenario is captured in a process of its own (CUPTI and torch.compile state are per
process) with 4 traced replays and 2 kept as events, so that each bundle stays small; each
bundle written is read back (``read_bundle``, ``read_compile``) and refused if it weighs
300 KB or more. Scenarios:

- ``try_streams_step``: sample_models/branches.py ``small`` (two independent branches of 4
  layers of 256), ``--mode step --try-streams 2``: a training step whose forward and
  backward the plan spreads over two streams, gradients compared.
- ``try_compile_chain``: sample_models/tiny_kernels.py ``short_chain`` (128 tiny elementwise
  kernels, latency-bound), ``--mode forward --try-compile L``: the whole chain compiled.
- ``try_compile_gpt``: sample_models/gpt.py, ``--mode forward --try-compile 'L.blocks.*'``:
  per transformer block, kernels and time eager and compiled.

The tests that read them (tests/unit/test_try_fixtures.py) skip, saying so, while a fixture
is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_BYTES = 300 * 1024

# name: (sample model, entry, mode, config, the command line's options)
SCENARIOS: dict[str, tuple[str, str, str, dict, list[str]]] = {
    "try_streams_step": ("branches.py", "small", "step", {"try_streams": 2},
                         ["--try-streams", "2"]),
    "try_compile_chain": ("tiny_kernels.py", "short_chain", "forward", {"try_compile": "L"},
                          ["--try-compile", "L"]),
    "try_compile_gpt": ("gpt.py", "graphscope_model", "forward",
                        {"try_compile": "L.blocks.*"}, ["--try-compile", "L.blocks.*"]),
}


def record(out_dir: str, name: str) -> None:
    """Capture one scenario into ``out_dir/name`` (in this process)."""
    from graphscope.capture import run_capture
    from graphscope.capture.config import CaptureConfig

    model, entry, mode, extra, opts = SCENARIOS[name]
    path = os.path.join(ROOT, "sample_models", model)
    cfg = CaptureConfig(model=path, entry=entry, mode=mode, replays=4, keep_events=2,
                        output=os.path.join(out_dir, name), force=True, **extra).validate()
    argv = ["graphscope", "capture", f"sample_models/{model}", "--mode", mode, *opts,
            "--replays", "4"] + (["--entry", entry] if entry != "graphscope_model" else [])
    res = run_capture(cfg, argv=argv)
    print(name, res.bundle_path, res.summary["work_nodes"], "work nodes", flush=True)


def check(out_dir: str, name: str) -> list[str]:
    """What is wrong with the recorded bundle (empty: nothing)."""
    from graphscope.model.bundle_files import read_compile
    from graphscope.model.bundle_io import read_bundle

    path = os.path.join(out_dir, name)
    problems = []
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    if size >= MAX_BYTES:
        problems.append(f"{path}: {size} bytes, not under {MAX_BYTES}")
    b = read_bundle(path)
    if SCENARIOS[name][3].get("try_streams"):
        wi = b.graphs[0].info.get("what_if_streams") or {}
        if "error" in wi or not wi:
            problems.append(f"{path}: what_if_streams: {wi.get('error', 'missing')}")
    else:
        doc = read_compile(path)
        errors = [g["error"] for g in (doc or {}).get("graphs", []) if "error" in g]
        if doc is None or errors:
            problems.append(f"{path}: compile.json: {errors or 'missing'}")
    print(f"{name}: {size} bytes", flush=True)
    return problems


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: python bench/record_try_fixtures.py OUTDIR [SCENARIO]", file=sys.stderr)
        return 2
    out_dir = os.path.abspath(argv[1])
    if len(argv) > 2:  # one scenario, in this process
        record(out_dir, argv[2])
        return 0
    problems = []
    for name in SCENARIOS:
        t = time.perf_counter()
        r = subprocess.run([sys.executable, os.path.abspath(__file__), out_dir, name],
                           check=False, cwd=ROOT)
        print(f"{name}: exit {r.returncode} in {time.perf_counter() - t:.1f} s", flush=True)
        problems += check(out_dir, name) if r.returncode == 0 else [f"{name}: failed"]
    for p in problems:
        print("PROBLEM", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Record the CPU tests' fixture bundles on a GPU box: `make fixtures`.

Each sample model is captured with few replays so the bundles stay small; versions go into each
bundle's manifest.
"""

import os
import subprocess
import sys

from graphscope.capture import run_capture
from graphscope.capture.config import CaptureConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data")

SCENARIOS = [
    ("mlp_step", "mlp.py", "step", True),
    ("mlp_callables", "mlp.py", "callables", True),
    ("cnn_step", "cnn.py", "step", True),
    ("gpt_step", "gpt.py", "step", True),
    ("marked_step", "marked.py", "step", True),
    ("sidestream_step", "sidestream.py", "step", True),
    ("mlp_annotate", "mlp.py", "step", False),
    ("decode_kv_forward", "decode_kv.py", "forward", True),
    ("train_step_bf16", "train_step_bf16.py", "step", True),
    # diagnosis: two independent branches on one stream and on two; a chain of tiny kernels
    ("branches_forward", "branches.py", "forward", True),
    ("branches_2s_forward", "branches.py:two_streams", "forward", True),
    ("tiny_forward", "tiny_kernels.py", "forward", True),
    # the what-if measured: the one-stream branches re-captured over more streams
    ("branches_try_streams", "branches.py", "forward", True),
    # eager vs graph: the step's eager baseline beside its graph (eager.json)
    ("mlp_step_eager", "mlp.py", "step", True),
    ("gpt_step_eager", "gpt.py", "step", True),
]



RUN_PROGRAMS = ("decode", "whole_network", "compiled", "partial_network", "train_step_amp")


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


def record(name: str) -> None:
    _, model, mode, timing = next(s for s in SCENARIOS if s[0] == name)
    model, _, entry = model.partition(":")
    cfg = CaptureConfig(model=os.path.join(ROOT, "sample_models", model), mode=mode, replays=4,
                        keep_events=2, output=os.path.join(OUT, name), force=True,
                        entry=entry or "graphscope_model",
                        eager_baseline=name.endswith("_eager"),
                        try_streams=4 if name.endswith("_try_streams") else 0).validate()
    cmd = "capture" if timing else "annotate"
    argv = ["graphscope", cmd, f"sample_models/{model}", "--mode", mode]
    if name.endswith("_eager"):
        argv.append("--eager-baseline")
    if name.endswith("_try_streams"):
        argv += ["--try-streams", "4"]
    res = run_capture(cfg, timing=timing, command=cmd,
                      argv=argv + (["--entry", entry] if entry else []))
    print(name, res.bundle_path, res.summary["work_nodes"], "work nodes",
          res.join.unjoined_records if res.join else "-", "unjoined", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        record(sys.argv[2])
    else:  # one process per bundle, as the CLI runs
        failed = 0
        for scenario in SCENARIOS:
            r = subprocess.run([sys.executable, __file__, OUT, scenario[0]], check=False)
            failed += r.returncode != 0
        # `graphscope run` bundles of the unmodified sample programs
        for prog in RUN_PROGRAMS:
            r = subprocess.run([sys.executable, "-m", "graphscope", "run", "--force", "-o",
                                os.path.join(OUT, f"run_{prog}"),
                                os.path.join("sample_models", "programs", f"{prog}.py")],
                               check=False, cwd=ROOT)
            failed += r.returncode != 0
        # a program that profiles its own replays: its bundle and its torch.profiler trace
        r = subprocess.run([sys.executable, "-m", "graphscope", "run", "--force", "-o",
                            os.path.join(OUT, "run_profiled"),
                            os.path.join("sample_models", "programs", "profiled.py"),
                            os.path.join(OUT, "run_profiled.trace.json")], check=False, cwd=ROOT)
        failed += r.returncode != 0
        # DDP over two ranks (needs two GPUs): BUNDLE/rank0, rank1
        if _gpus() >= 2:
            r = subprocess.run([sys.executable, "-m", "graphscope", "capture", "--nproc", "2",
                                "--replays", "4", "--force", "-o",
                                os.path.join(OUT, "ddp_mlp_step"),
                                os.path.join("sample_models", "ddp_mlp.py")],
                               check=False, cwd=ROOT)
            failed += r.returncode != 0
        sys.exit(1 if failed else 0)

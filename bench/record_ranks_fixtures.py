"""Record the two-rank GPT-2 fixtures with an injected straggler (needs 2 GPUs):

    python bench/record_ranks_fixtures.py [--out tests/data] [--only ddp|fsdp2]
                                          [--delay-us 500] [--replays 6] [--keep-events 5]

For DDP (sample_models/gpt2_ranks.py) and FSDP2 (its entry ``fsdp2``) it runs
``graphscope capture --nproc 2`` (torchrun underneath, NVLink multicast off, as users run
it) with GRAPHSCOPE_STRAGGLER making rank 1 spin about --delay-us on its GPU at the start of
``transformer.h.0.mlp``'s forward. Each writes OUT/<scenario>_gpt2_straggler/rank0, rank1 and
straggler.json beside them: the injection, the command, the date and the machine. Then
``graphscope report OUT/<scenario>_gpt2_straggler`` names the straggler, and
tests/unit/test_ranks_fixtures.py checks the verdict on CPUs. Exit code: 0 when every
scenario was recorded, else 1 (each failure's output printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "sample_models", "gpt2_ranks.py")
STRAGGLER = {"rank": 1, "module": "transformer.h.0.mlp"}
SCENARIOS = {"ddp": "graphscope_model", "fsdp2": "fsdp2"}


def record(scenario: str, out: str, delay_us: float, replays: int, keep_events: int) -> bool:
    """One scenario's bundle and its straggler.json; False (output printed) on failure."""
    path = os.path.join(out, f"{scenario}_gpt2_straggler")
    cmd = [sys.executable, "-m", "graphscope", "capture", "--nproc", "2", "--force",
           "--entry", SCENARIOS[scenario], "--replays", str(replays), "-o", path, MODEL]
    env = {**os.environ, "GRAPHSCOPE_KEEP_EVENTS": str(keep_events),
           "GRAPHSCOPE_STRAGGLER": f"{STRAGGLER['rank']}:{STRAGGLER['module']}:{delay_us:g}"}
    if os.path.isdir(path):
        shutil.rmtree(path)
    t = time.time()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        print(f"{scenario}: graphscope capture failed ({r.returncode})\n{r.stdout[-4000:]}\n"
              f"{r.stderr[-8000:]}", file=sys.stderr)
        return False
    import torch

    with open(os.path.join(path, "straggler.json"), "w") as f:
        json.dump({"rank": STRAGGLER["rank"], "module": STRAGGLER["module"],
                   "module_name": f"L.{STRAGGLER['module']}", "delay_us": delay_us,
                   "scenario": scenario,
                   "command": ["GRAPHSCOPE_STRAGGLER=" + env["GRAPHSCOPE_STRAGGLER"],
                               "GRAPHSCOPE_KEEP_EVENTS=" + env["GRAPHSCOPE_KEEP_EVENTS"],
                               "graphscope", *cmd[3:]],
                   "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
                   "machine": f"{platform.node()}: {torch.cuda.device_count()}x "
                              f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"},
                  f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{scenario}: wrote {path} in {time.time() - t:.0f} s")
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data"))
    p.add_argument("--only", choices=sorted(SCENARIOS), default=None)
    p.add_argument("--delay-us", type=float, default=500.0)
    p.add_argument("--replays", type=int, default=6)
    p.add_argument("--keep-events", type=int, default=5)
    a = p.parse_args(argv)
    import torch

    if torch.cuda.device_count() < 2:
        print(f"needs 2 GPUs, this machine has {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    ok = [record(s, a.out, a.delay_us, a.replays, a.keep_events)
          for s in ([a.only] if a.only else sorted(SCENARIOS))]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())

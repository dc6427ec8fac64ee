"""Cost of ``graphscope run`` on a program's eager work: an eager training loop (no CUDA
graph) timed by itself, plain vs under graphscope's observer, in alternating fresh processes
of one bench run. Prints JSON; the figure goes to docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

PROGRAM = r'''
import json, time, torch
from torch import nn
model = nn.Sequential(*[nn.Sequential(nn.Linear(1024, 1024), nn.GELU(), nn.LayerNorm(1024))
                        for _ in range(8)], nn.Linear(1024, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(256, 1024, device="cuda"); y = torch.randint(0, 10, (256,), device="cuda")
crit = nn.CrossEntropyLoss()
def it():
    opt.zero_grad(set_to_none=True)
    crit(model(x), y).backward()
    opt.step()
for _ in range(20): it()
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(200): it()
torch.cuda.synchronize()
print("RESULT", json.dumps({"iter_ms": (time.perf_counter() - t) / 200 * 1e3}))
'''


def once(path: str, observed: bool) -> float:
    cmd = ([sys.executable, "-m", "graphscope", "run", "-o", path + ".run", "--force", path]
           if observed else [sys.executable, path])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
    return float(json.loads(line.split(" ", 1)[1])["iter_ms"])


def main(rounds: int = 5) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "eager_train.py")
        with open(path, "w") as f:
            f.write(PROGRAM)
        plain, run = [], []
        for _ in range(rounds):
            plain.append(once(path, False))
            run.append(once(path, True))
    res = {"plain_iter_ms": statistics.median(plain), "run_iter_ms": statistics.median(run),
           "ratio": statistics.median(run) / statistics.median(plain),
           "rounds": rounds, "plain_all": plain, "run_all": run}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)

"""Diagnosis cost on a recorded bundle: ``diagnose(read_bundle(B))`` timed as `bench_diagnosis`
times its synthetic graph (``timed``: best and median wall and CPU time of 5 runs in one
process, the bundle read once and its cached properties dropped before each run).

``--record DIR`` first records the real graph this is meant for, on a GPU: ``graphscope run``
of a GPT-2 training step from transformers (random weights, no download) with 48 layers,
gradients accumulated over 8 micro-batches and AdamW stepping each parameter alone (foreach
off): one graph of ~43,000 nodes, 10 replays, 3 of them kept as events.
Usage: bench_diagnosis_bundle.py BUNDLE [OUT.json] | --record DIR [OUT.json]
"""

import os
import platform
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from _measure import write_json  # noqa: E402
from bench_diagnosis import timed  # noqa: E402

from graphscope.model.bundle_io import read_bundle  # noqa: E402

PROGRAM = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel
model = GPT2LMHeadModel(GPT2Config(n_layer=48, n_embd=256, n_head=4, vocab_size=1000,
                                   n_positions=64)).cuda()
ids = [torch.randint(0, 1000, (4, 32), device="cuda") for _ in range(8)]
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False, capturable=True)


def step():
    opt.zero_grad(set_to_none=False)
    for x in ids:  # gradient accumulation over 8 micro-batches
        (model(input_ids=x, labels=x).loss / len(ids)).backward()
    opt.step()


s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    step()
for _ in range(10):
    g.replay()
torch.cuda.synchronize()
"""


def record(out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "gpt2_48_layers_accumulate8.py")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        subprocess.run([sys.executable, "-m", "graphscope", "run", "--force", "-o", out, prog],
                       check=True, cwd=ROOT)


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    if args[0] == "--record":
        record(args[1])
        args = args[1:]
    path, out_path = args[0], (args[1] if len(args) > 1 else None)
    res = {"bundle": os.path.basename(os.path.abspath(path)), **timed(read_bundle(path)),
           "python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count()}
    write_json(out_path, res)

if __name__ == "__main__":
    main()

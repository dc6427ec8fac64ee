"""A training step captured whole into a CUDA graph, whose replays the program profiles itself
with torch.profiler on a schedule, exporting a Chrome trace to argv[1] (default trace.json).
Unmodified program: nothing here knows about graphscope. Under `graphscope run` the bundle's
annotations can then be joined onto this trace with `graphscope annotate-trace`."""

import sys

import torch
from torch import nn

out = sys.argv[1] if len(sys.argv) > 1 else "trace.json"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512),
                      nn.Linear(512, 256)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
target = torch.randn(64, 256, device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    return loss


s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(s)

g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g):
    static_loss = step()

for _ in range(3):
    g.replay()
# the usual profiling loop: a schedule (1 step waiting, 1 warming up, 5 recorded), one
# prof.step() per training step, the trace written when the recorded steps are done
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA],
                            schedule=torch.profiler.schedule(wait=1, warmup=1, active=5,
                                                             repeat=1),
                            on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
    for _ in range(8):
        g.replay()
        torch.cuda.synchronize()
        prof.step()
print(f"profiled 5 replays, loss {static_loss.item():.4f}; trace in {out}")

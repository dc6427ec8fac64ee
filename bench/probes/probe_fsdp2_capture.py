"""Does an FSDP2 (fully_shard) training step capture into a CUDA graph on this torch?

Run: torchrun --nproc-per-node 2 bench/probes/probe_fsdp2_capture.py, or under graphscope:
torchrun --nproc-per-node 2 -m graphscope run -o fsdp2.run bench/probes/probe_fsdp2_capture.py
Prints one line per rank: captured (with node count) or the error capture raised.
"""

import os

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    from torch.distributed.fsdp import fully_shard

    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).cuda()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    x = torch.randn(32, 256, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            model(x).sum().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    try:
        with torch.cuda.graph(g):
            opt.zero_grad(set_to_none=False)
            model(x).sum().backward()
            opt.step()
        g.instantiate()
        for _ in range(10):  # replays a profiler can trace
            g.replay()
        torch.cuda.synchronize()
        print(f"rank {rank}: FSDP2 step captured and replayed", flush=True)
    except Exception as exc:  # the answer this probe exists to give
        msg = str(exc).strip().splitlines()
        print(f"rank {rank}: FSDP2 capture failed: {type(exc).__name__}: "
              f"{msg[0] if msg else ''}", flush=True)


if __name__ == "__main__":
    main()

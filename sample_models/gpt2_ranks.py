"""transformers' GPT-2 (a small config, random weights, nothing downloaded) trained on several
GPUs: `graphscope capture --nproc 2 sample_models/gpt2_ranks.py` wraps it in DDP; with
`--entry fsdp2` the model file shards each block and the root with FSDP2 itself.

A straggler on demand: GRAPHSCOPE_STRAGGLER="<rank>:<module path>:<microseconds>" (a path of
``named_modules()``, e.g. ``transformer.h.0.mlp``) makes that rank spin on its GPU for about
that long at the start of the module's forward (``torch.cuda._sleep``: one ``spin_kernel``,
captured in the step graph like the module's other kernels). The other ranks then wait for
it at the next collective that depends on the module's work.
"""

from __future__ import annotations

import os
import statistics

import torch
from transformers import GPT2Config, GPT2LMHeadModel

STRAGGLER_ENV = "GRAPHSCOPE_STRAGGLER"


def _gpt2() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config), torch.randint(0, 1000, (4, 32))


def spin_cycles(ns: float) -> int:
    """``torch.cuda._sleep`` cycles that spin the current GPU for about ``ns`` (timed here with
    CUDA events: the SM clock differs between GPUs and boost states)."""
    n = 2_000_000
    torch.cuda._sleep(n)  # the first launch loads the kernel
    per_ns = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(n)
        b.record()
        b.synchronize()
        per_ns.append(n / (a.elapsed_time(b) * 1e6))
    return max(1, int(ns * statistics.median(per_ns)))


def inject_straggler(model: torch.nn.Module) -> None:
    """Make this rank the straggler that GRAPHSCOPE_STRAGGLER names (module docstring)."""
    spec = os.environ.get(STRAGGLER_ENV)
    if not spec:
        return
    rank, path, us = spec.split(":")
    if int(rank) != int(os.environ.get("RANK", "0")):
        return
    module = model.get_submodule(path)
    cycles = spin_cycles(float(us) * 1e3)
    real = module.forward

    def forward(*args, **kwargs):
        torch.cuda._sleep(cycles)
        return real(*args, **kwargs)

    module.forward = forward


def graphscope_model():
    model, ids = _gpt2()
    inject_straggler(model.cuda())
    return {"model": model, "kwargs": {"input_ids": ids, "labels": ids},
            "settings": {"ddp": True}}


def fsdp2():
    """Each transformer block and the root sharded with FSDP2 over every rank's GPU."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if not dist.is_initialized():
        dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    model, ids = _gpt2()
    model.cuda()
    inject_straggler(model)
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return {"model": model, "kwargs": {"input_ids": ids, "labels": ids}}

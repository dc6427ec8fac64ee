"""``--mode step``: a model file's training step captured as one graph.

Without ``"step"`` in the model file: forward + loss + backward of the model. With
``"step": fn``: the user's whole step ``fn(model, *args, **kwargs)`` (optimizer with
``capturable=True``, ``torch.autocast``, micro-batches ...), warmed up on a side stream first.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, Callable, ClassVar

from .. import annotate as ann
from ..annotate import state
from ..annotate.fsdp import FSDPWatch, fsdp_modules
from ..annotate.training import DDPWatch, leaf_scopes, optimizer_hooks, param_owners
from .cuda_graphs import graph as annotated_graph
from .meter import CaptureMeter, tensor_bytes
from .source import ModelJob, Phase, RawCapture, inspect_template, register, set_exec_id

LOSS_SCOPE = {"module_name": "(loss)"}
# Work of a user's step outside every module (its loss, its own tensor math), forward and
# backward; modules and the optimizer open their own scopes inside it.
STEP_SCOPE = {"module_name": "(step)"}


def zero_grad(model: Any) -> None:
    if hasattr(model, "parameters"):
        for p in model.parameters():
            p.grad = None


def _default_step(job: ModelJob) -> Callable[[], Any]:
    def step() -> Any:
        zero_grad(job.model)
        return job.loss_fn(job.model(*job.args, **job.kwargs)).backward()

    return step


def _user_step(job: ModelJob) -> Callable[[], Any]:
    assert job.step is not None
    fn, model, args, kwargs = job.step, job.model, job.args, job.kwargs
    return lambda: fn(model, *args, **kwargs)


def step_of(job: ModelJob) -> Callable[[], Any]:
    """What ``--mode step`` captures, as one callable: the file's own step, or forward + loss
    + backward."""
    return _user_step(job) if job.step is not None else _default_step(job)


def warmup(step: Callable[[], Any], n: int) -> None:
    """``n`` eager iterations on a side stream (torch's recipe before a capture)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def unwrap_ddp(model: Any) -> Any:
    """The module inside DistributedDataParallel (its parameters carry the module paths)."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


@contextlib.contextmanager
def training_scopes(job: ModelJob) -> Iterator[Any]:
    """Module scopes (forward and backward), the optimizer scope, ``.grad`` accumulation to
    the parameter's module, DDP's buckets and FSDP2's collectives: armed for one capture,
    undone on every path."""
    from torch.nn.parallel import DistributedDataParallel

    inner = unwrap_ddp(job.model)
    handles: list[Any] = [ann.register_module_annotations(inner, depth=job.depth,
                                                          backward=job.backward)]
    handles += optimizer_hooks()
    if fsdp_modules(inner):  # FSDP2: its all-gathers and reduce-scatters, forward and backward
        handles.append(FSDPWatch().arm())
    if isinstance(job.model, DistributedDataParallel) and job.backward:
        state.ATTRIBUTION.ddp = DDPWatch(job.model, job.depth)
    owners = param_owners(inner, job.depth)
    try:
        yield leaf_scopes(lambda p: owners.get(id(p)), source="model")
    finally:
        state.ATTRIBUTION.ddp = None
        for h in handles:
            h.remove()


@register
class StepSource:
    name: ClassVar[str] = "step"
    help: ClassVar[str] = ("one graph of forward + loss + backward, or of the model file's "
                           "whole \"step\"")
    takes: ClassVar[str] = "model"

    def capture(self, job: ModelJob, phase: Phase) -> RawCapture:
        import torch

        user = job.step is not None
        step = step_of(job)
        phase("warmup")
        warmup(step, job.warmup)
        phase("capture")
        if not user:
            zero_grad(job.model)
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with training_scopes(job) as leaf, CaptureMeter().measure(g) as info:
            with annotated_graph(g, enable_annotations=True, record_ops=job.record_ops) as cap:
                state.ATTRIBUTION.active.leaf_scope = leaf
                if user:
                    with ann.mark_kernels(STEP_SCOPE, backward=job.backward):
                        outputs: Any = step()
                else:
                    out = job.model(*job.args, **job.kwargs)
                    with ann.mark_kernels(LOSS_SCOPE, backward=job.backward):
                        loss = job.loss_fn(out)
                        loss.backward()  # the gradient seed (ones_like) belongs to the loss
                    outputs = (out, loss)
        info["static_input_bytes"] = tensor_bytes((job.args, job.kwargs))
        if outputs is not None:  # the model's output and loss (a user step: what it returns)
            info["static_output_bytes"] = tensor_bytes(outputs)
        phase("inspect")
        raw = inspect_template(g, "step", cap.records)
        raw.info = info
        phase("instantiate")
        t = time.perf_counter()
        g.instantiate()
        info["instantiate_s"] = round(time.perf_counter() - t, 6)
        set_exec_id(raw, g)
        ann.remap_to_exec_graph(g)
        return RawCapture([raw], replay=g.replay, meta={"step": "user" if user else "model"})

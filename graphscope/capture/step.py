"""``--mode step``: a model file's training step captured as one graph.

Without ``"step"`` in the model file: forward + loss + backward of the model. With
``"step": fn``: the user's whole step ``fn(model, *args, **kwargs)`` (optimizer with
``capturable=True``, ``torch.autocast``, micro-batches ...), warmed up on a side stream first.
With ``--try-streams N`` the step is also captured with its ops, backward included, over N
streams, compared and timed beside it (streams_train.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable, ClassVar

from .. import annotate as ann
from ..annotate.fsdp import FSDPWatch, fsdp_modules
from ..annotate.session import Session
from ..annotate.training import DDPWatch, leaf_scopes, optimizer_hooks, param_owners
from ..model.bundle_files import COMPILE_FILE
from .cuda_graphs import graph as annotated_graph
from .meter import CaptureMeter, tensor_bytes
from .source import (
    ModelJob,
    Phase,
    RawCapture,
    inspect_template,
    register,
    set_exec_id,
    warmup,
)
from .streams import WHAT_IF_KEY

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


def unwrap_ddp(model: Any) -> Any:
    """The module inside DistributedDataParallel (its parameters carry the module paths)."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


@contextlib.contextmanager
def training_scopes(job: ModelJob) -> Iterator[Session]:
    """Module scopes (forward and backward), the optimizer scope, ``.grad`` accumulation to
    the parameter's module, DDP's buckets and FSDP2's collectives: armed for one capture,
    undone on every path; yields the capture's session."""
    from torch.nn.parallel import DistributedDataParallel

    inner = unwrap_ddp(job.model)
    handles: list[Any] = [ann.register_module_annotations(inner, depth=job.depth,
                                                          backward=job.backward)]
    handles += optimizer_hooks()
    if fsdp_modules(inner):  # FSDP2: its all-gathers and reduce-scatters, forward and backward
        handles.append(FSDPWatch().arm())
    ddp = (DDPWatch(job.model, job.depth)
           if isinstance(job.model, DistributedDataParallel) and job.backward else None)
    owners = param_owners(inner, job.depth)
    try:
        yield Session(job.record_ops, ddp=ddp,
                      leaf_scope=leaf_scopes(lambda p: owners.get(id(p)), source="model"))
    finally:
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
        with training_scopes(job) as session, CaptureMeter().measure(g) as info:
            with annotated_graph(g, session=session) as cap:
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
        if job.try_streams > 1:  # outside the annotation hooks: a plain capture
            phase("what-if")
            raw.info[WHAT_IF_KEY] = _try_streams(job, g, raw.exec_id, outputs)
        extra: dict[str, Callable[[], Mapping[str, Any]]] = {}
        if job.try_compile:
            phase("try-compile")
            doc = _try_compile(job)
            extra[COMPILE_FILE] = lambda: doc
        return RawCapture([raw], replay=g.replay, meta={"step": "user" if user else "model"},
                          extra_files=extra)


def _run_again(job: ModelJob) -> Callable[[], Any]:
    """The step once more, returning what its capture returned: the file's own step, or
    forward + loss + backward returning (output, loss)."""
    from .streams_train import planned_default_step

    return step_of(job) if job.step is not None else planned_default_step(
        job.model, job.args, job.kwargs, job.loss_fn)


def _try_streams(job: ModelJob, graph: Any, exec_id: int, outputs: Any) -> dict[str, Any]:
    """The step graph's ``what_if_streams`` (capture/streams_train.py)."""
    from .streams_train import ddp_refusal, try_streams_step

    refused = ddp_refusal(job.model)
    if refused:
        return {"max_streams": job.try_streams, "error": refused}
    return try_streams_step(_run_again(job), unwrap_ddp(job.model), graph, exec_id, outputs,
                            job.try_streams, max(job.replays, 3), job.warmup)


def _try_compile(job: ModelJob) -> dict[str, Any]:
    """compile.json of the step (capture/compile.py)."""
    from .compile import try_compile
    from .streams_train import ddp_refusal

    assert job.try_compile is not None
    return try_compile(unwrap_ddp(job.model), job.try_compile, [("step", _run_again(job))],
                       job.warmup, max(job.replays, 3), refused=ddp_refusal(job.model))

"""``--mode step``: forward + loss + backward of a model file captured as one graph."""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from .. import annotate as ann
from ..cuda_graphs import graph as annotated_graph
from .source import ModelJob, Phase, RawCapture, inspect_template, register, set_exec_id

LOSS_SCOPE = {"module_name": "(loss)"}


def zero_grad(model: Any) -> None:
    if hasattr(model, "parameters"):
        for p in model.parameters():
            p.grad = None


def warmup(model: Any, args: tuple, kwargs: dict, loss_fn: Callable, n: int) -> None:
    """``n`` eager iterations on a side stream (torch's recipe before a capture)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            zero_grad(model)
            loss_fn(model(*args, **kwargs)).backward()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


@register
class StepSource:
    name: ClassVar[str] = "step"
    help: ClassVar[str] = "one graph of forward + loss + backward"

    def capture(self, job: ModelJob, phase: Phase) -> RawCapture:
        import torch

        phase("warmup")
        warmup(job.model, job.args, job.kwargs, job.loss_fn, job.warmup)
        phase("capture")
        zero_grad(job.model)
        g = torch.cuda.CUDAGraph(keep_graph=True)
        handle = ann.register_module_annotations(job.model, depth=job.depth,
                                                 backward=job.backward)
        try:
            with annotated_graph(g, enable_annotations=True, record_ops=job.record_ops) as cap:
                out = job.model(*job.args, **job.kwargs)
                with ann.mark_kernels(LOSS_SCOPE, backward=job.backward):
                    loss = job.loss_fn(out)
                    loss.backward()  # the gradient seed (ones_like) belongs to the loss
        finally:
            handle.remove()
        phase("inspect")
        raw = inspect_template(g, "step", cap.records)
        phase("instantiate")
        g.instantiate()
        set_exec_id(raw, g)
        ann.remap_to_exec_graph(g)
        return RawCapture([raw], replay=g.replay)

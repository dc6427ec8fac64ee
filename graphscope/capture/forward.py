"""``--mode forward``: inference graphs, one per input set, as serving engines capture them.

Each input set (``"args"``/``"kwargs"``, or every entry of ``"buckets"``) is warmed up and
captured under ``torch.inference_mode()`` with the model in eval mode: no loss, no autograd,
no backward hooks. One bundle holds a graph per bucket. With ``--try-streams N`` each graph
is also captured with its independent ops over N streams and timed beside it (streams.py).
"""

from __future__ import annotations

import functools
import time
from typing import ClassVar

from .. import annotate as ann
from ..annotate.fsdp import FSDPWatch, fsdp_modules
from .cuda_graphs import graph as annotated_graph
from .meter import CaptureMeter, tensor_bytes
from .run.names import describe_shapes
from .source import ModelJob, Phase, RawCapture, inspect_template, register, set_exec_id
from .step import warmup
from .streams import WHAT_IF_KEY, try_streams


def bucket_name(i: int, args: tuple, kwargs: dict, n: int) -> str:
    if n == 1:
        return "forward"
    shapes = describe_shapes(list(args) + list(kwargs.values()))
    return f"bucket{i} {shapes}".rstrip()


@register
class ForwardSource:
    name: ClassVar[str] = "forward"
    help: ClassVar[str] = ("inference: one graph per input set (\"buckets\"), forward only "
                           "under torch.inference_mode()")
    takes: ClassVar[str] = "model"

    def capture(self, job: ModelJob, phase: Phase) -> RawCapture:
        import torch

        sets = list(job.buckets) or [(job.args, job.kwargs)]
        model = job.model
        if hasattr(model, "eval"):
            model.eval()
        raws, graphs, outs = [], [], []
        meter = CaptureMeter()
        handle = ann.register_module_annotations(model, depth=job.depth, backward=False)
        fsdp = FSDPWatch().arm() if fsdp_modules(model) else None  # FSDP2's all-gathers
        try:
            for i, (args, kwargs) in enumerate(sets):
                phase("warmup")
                with torch.inference_mode():
                    warmup(functools.partial(model, *args, **kwargs), max(job.warmup, 1))
                phase("capture")
                g = torch.cuda.CUDAGraph(keep_graph=True)
                with torch.inference_mode(), meter.measure(g) as cost:
                    with annotated_graph(g, enable_annotations=True,
                                         record_ops=job.record_ops) as cap:
                        out = model(*args, **kwargs)
                phase("inspect")
                raw = inspect_template(g, bucket_name(i, args, kwargs, len(sets)), cap.records)
                raw.info = {"kind": "forward", "bucket": i,
                            "shapes": describe_shapes(list(args) + list(kwargs.values())),
                            **cost, "static_input_bytes": tensor_bytes((args, kwargs)),
                            "static_output_bytes": tensor_bytes(out)}
                phase("instantiate")
                t = time.perf_counter()
                g.instantiate()
                raw.info["instantiate_s"] = round(time.perf_counter() - t, 6)
                set_exec_id(raw, g)
                ann.remap_to_exec_graph(g)
                outs.append(out)
                raws.append(raw)
                graphs.append(g)
        finally:
            handle.remove()
            if fsdp is not None:
                fsdp.remove()
        if job.try_streams > 1:  # outside the annotation hooks: a plain capture
            for (args, kwargs), raw, g, out in zip(sets, raws, graphs, outs):
                phase("what-if")
                raw.info[WHAT_IF_KEY] = try_streams(functools.partial(model, *args, **kwargs),
                                                    g, raw.exec_id, out, job.try_streams,
                                                    max(job.replays, 3))

        def replay() -> None:
            for g in graphs:
                g.replay()

        return RawCapture(raws, replay=replay, meta={"buckets": len(sets)})

"""``--mode forward``: inference graphs, one per input set, as serving engines capture them.

Each input set (``"args"``/``"kwargs"``, or every entry of ``"buckets"``) is warmed up and
captured under ``torch.inference_mode()`` with the model in eval mode: no loss, no autograd,
no backward hooks. One bundle holds a graph per bucket. With ``--try-streams N`` each graph
is also captured with its independent ops over N streams and timed beside it (streams.py);
with ``--try-compile GLOB`` with the modules GLOB matches compiled (compile.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any, Callable, ClassVar

from .. import annotate as ann
from ..annotate.fsdp import FSDPWatch, fsdp_modules
from ..model.bundle_files import COMPILE_FILE
from .cuda_graphs import graph as annotated_graph
from .meter import CaptureMeter, tensor_bytes
from .run.names import describe_shapes
from .source import (
    ModelJob,
    Phase,
    RawCapture,
    RawGraph,
    inspect_template,
    register,
    set_exec_id,
    warmup,
)
from .streams import WHAT_IF_KEY, try_streams


def bucket_name(i: int, args: tuple, kwargs: dict, n: int) -> str:
    if n == 1:
        return "forward"
    shapes = describe_shapes(list(args) + list(kwargs.values()))
    return f"bucket{i} {shapes}".rstrip()


@register
class ForwardSource:
    name: ClassVar[str] = "forward"
    help: ClassVar[str] = ("one inference graph per input set (\"buckets\"), forward only "
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
        extra = _tries(job, sets, raws, graphs, outs, phase)

        def replay() -> None:
            for g in graphs:
                g.replay()

        return RawCapture(raws, replay=replay, meta={"buckets": len(sets)}, extra_files=extra)


def _tries(job: ModelJob, sets: list[tuple[tuple, dict]], raws: list[RawGraph],
           graphs: list[Any], outs: list[Any], phase: Phase
           ) -> dict[str, Callable[[], Mapping[str, Any]]]:
    """``--try-streams`` (each graph's ``what_if_streams``) and ``--try-compile``
    (compile.json), outside the annotation hooks."""
    runs = [functools.partial(job.model, *args, **kwargs) for args, kwargs in sets]
    if job.try_streams > 1:
        for run, raw, g, out in zip(runs, raws, graphs, outs):
            phase("what-if")
            raw.info[WHAT_IF_KEY] = try_streams(run, g, raw.exec_id, out, job.try_streams,
                                                max(job.replays, 3))
    if not job.try_compile:
        return {}
    from .compile import try_compile

    phase("try-compile")
    doc = try_compile(job.model, job.try_compile,
                      [(raw.name, _inference(run)) for raw, run in zip(raws, runs)],
                      job.warmup, max(job.replays, 3))
    return {COMPILE_FILE: lambda: doc}


def _inference(run: Callable[[], Any]) -> Callable[[], Any]:
    def forward() -> Any:
        import torch

        with torch.inference_mode():
            return run()

    return forward

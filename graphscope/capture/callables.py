"""``--mode callables``: forward and backward graphs as ``make_graphed_callables`` makes them.

With ``--try-streams N`` both are also captured with their ops over N streams, compared and
timed beside torch's (streams_train.py)."""

from __future__ import annotations

from typing import ClassVar

from .._errors import CaptureError
from .cuda_graphs import graph_callables
from .meter import CaptureMeter, pool_facts
from .source import ModelJob, Phase, RawCapture, inspect_template, register, set_exec_id
from .step import zero_grad
from .streams import WHAT_IF_KEY


@register
class CallablesSource:
    name: ClassVar[str] = "callables"
    help: ClassVar[str] = "forward and backward graphs as make_graphed_callables makes them"
    takes: ClassVar[str] = "model"

    def capture(self, job: ModelJob, phase: Phase) -> RawCapture:
        if job.kwargs:
            raise CaptureError("--mode callables takes positional tensors only "
                               "(make_graphed_callables refuses keyword arguments): use "
                               "--mode step")
        phase("capture")
        meter = CaptureMeter(history=False, scopes=False)  # torch's hooks come later
        meter.begin()
        made = graph_callables(job.model, job.args, num_warmup_iters=max(job.warmup, 1),
                               module_depth=job.depth, record_ops=job.record_ops)
        graphed = made.callables
        # torch's warm-up, both captures and instantiates in one call: timed as one
        window = meter.end(made.graphs[0]) if made.graphs else {}
        phase("inspect")
        if len(made.graphs) != 2:
            raise CaptureError("expected a forward and a backward graph, torch made "
                               f"{len(made.graphs)}")
        raws = []
        for name, g in zip(("forward", "backward"), made.graphs):
            raw = inspect_template(g, name, made.records)
            raw.info = pool_facts(g)
            set_exec_id(raw, g)
            raws.append(raw)
        model, args, loss_fn = job.model, job.args, job.loss_fn
        if job.try_streams > 1:
            phase("what-if")
            from .streams_train import try_streams_callables

            tried = try_streams_callables(model, graphed, args, made.graphs,
                                          [r.exec_id for r in raws], job.try_streams,
                                          max(job.replays, 3), job.warmup)
            for raw, entry in zip(raws, tried):
                raw.info[WHAT_IF_KEY] = entry

        def replay() -> None:
            zero_grad(model)
            loss_fn(graphed(*args)).backward()

        meta = {"capture_s": window["capture_s"]} if "capture_s" in window else {}
        return RawCapture(raws, replay=replay, meta=meta)

"""``capture --try-streams N`` for training graphs: the step of ``--mode step`` (forward,
loss, backward and whatever the model file's own step does: optimizer, scaler) and the
forward and backward graphs of ``--mode callables``, captured again with their ops over up to
N streams (the plan of :mod:`.streams`; backward ops are planned too: autograd's engine runs
them with the dispatch modes of the thread that called backward) and timed beside the
captured graphs, alternated.

What the two versions compute is compared from the same state. A step writes in place what
it does not make (parameters, optimizer state, running statistics, gradients kept between
steps): the plan collects those tensors, their bytes and the CUDA generator's state are kept
(:class:`~.compare.StateSnapshot`), each graph runs one step from them, and what it left is
compared: the step's outputs, every parameter's gradient and the state written in place;
the state is then put back. The forward and backward graphs of ``make_graphed_callables``
are compared through torch's graphed function (forward outputs, then the gradients of the
inputs and parameters for the same seeded gradient of the outputs) against the re-captured
pair replayed by hand.

Each graph's ``info`` gets ``what_if_streams``, the keys forward mode writes (the report
reads them alike) and ``compared`` per part (outputs, gradients, state).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ..annotate.tensors import storage_key, tensors_in
from .alternate import exec_id_of, one_line, trace_alternated
from .compare import (
    Ran,
    StateSnapshot,
    clone_all,
    compare_named,
    compare_replays,
    compare_values,
    grad_pairs,
    summary,
)
from .streams import capture_on_streams, capture_planned, plan_mode, timing

KIND = "reordered"  # the tolerances of the same ops in another order (compare.TOLERANCES)


def named_grads(model: Any) -> dict[str, Any]:
    """{"L.<path>": the parameter's .grad (None where it has none)} of the parameters that
    require grad, named as graphscope names modules."""
    if not hasattr(model, "named_parameters"):
        return {}
    return {_name(n): p.grad for n, p in model.named_parameters() if p.requires_grad}


def set_grads(model: Any, grads: Mapping[str, Any]) -> None:
    """Point each parameter's ``.grad`` back at ``grads`` (what the captured graph writes)."""
    if hasattr(model, "named_parameters"):
        for n, p in model.named_parameters():
            if _name(n) in grads:
                p.grad = grads[_name(n)]


def _name(path: str) -> str:
    return f"L.{path}" if path else "L"


def state_names(model: Any) -> dict[int, str]:
    """{storage: "L.<path>"} of the model's parameters and buffers; other state a step
    writes (an optimizer's) is named by its dtype and shape."""
    out: dict[int, str] = {}
    for group in ("named_parameters", "named_buffers"):
        for n, t in getattr(model, group, lambda: ())():
            out.setdefault(storage_key(t), _name(n))
    return out


def try_streams_step(run: Callable[[], Any], model: Any, graph: Any, exec_id: int,
                     outputs: Any, n: int, replays: int, warmup: int) -> dict[str, Any]:
    """The step graph's ``what_if_streams``: ``run`` (the step, returning what the captured
    step returned) captured over ``n`` streams, compared and timed beside ``graph``.
    Failures are reported in it (``error``), not raised."""
    grads = named_grads(model)  # the captured graph's: its capture made them
    try:
        alt = capture_on_streams(run, n, warmup)
        alt_grads = named_grads(model)
    except Exception as exc:  # torch.cuda.graph ended the capture; the process goes on
        return {"max_streams": n, "error": one_line(exc)}
    finally:
        set_grads(model, grads)
    try:
        parts = compare_replays(Ran(graph, outputs, grads), Ran(alt.graph, alt.output, alt_grads),
                                alt.external, state_names(model), KIND)
        cols = trace_alternated([(graph, alt.graph)], replays)
        return {**timing(exec_id, exec_id_of(alt.graph), cols, alt, replays, n),
                **summary(parts, KIND)}
    except Exception as exc:  # the tracer refused (a profiler active) or a replay failed
        return {"max_streams": n, "error": "measuring: " + one_line(exc)}
    finally:
        del alt


def planned_default_step(model: Any, args: tuple, kwargs: dict[str, Any],
                         loss_fn: Callable[[Any], Any]) -> Callable[[], Any]:
    """Forward + loss + backward, returning ``(output, loss)`` as the captured step does."""

    def step() -> Any:
        if hasattr(model, "parameters"):
            for p in model.parameters():
                p.grad = None
        out = model(*args, **kwargs)
        loss = loss_fn(out)
        loss.backward()
        return out, loss

    return step


def original_forward(model: Any) -> Callable[..., Any]:
    """The model's own forward: ``make_graphed_callables`` replaced a module's ``forward``
    by its graphed one."""
    import torch

    if isinstance(model, torch.nn.Module):
        return functools.partial(type(model).forward, model)
    return model


class PlannedCallables:
    """A forward graph and a backward graph over ``n`` streams, captured as
    ``make_graphed_callables`` captures them (a shared pool; the backward graph is
    ``torch.autograd.grad`` of the outputs that require grad for static output gradients)."""

    def __init__(self, fwd: Callable[..., Any], args: tuple, surface: list[Any], n: int,
                 warmup: int) -> None:
        import torch

        mode = plan_mode(n)

        def forward() -> Any:
            return fwd(*args)

        def backward() -> Any:
            return torch.autograd.grad(self.req, surface, grad_outputs=self.grad_outputs,
                                       allow_unused=True)

        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            for _ in range(max(warmup, 1)):
                with mode:
                    self.req = [o for o in tensors_in(forward()) if o.requires_grad]
                    self.grad_outputs = [torch.ones_like(o) for o in self.req]
                    backward()
        torch.cuda.current_stream().wait_stream(warm)
        torch.cuda.synchronize()
        pool = torch.cuda.graph_pool_handle()
        self.fwd = capture_planned(mode, forward, pool)
        self.req = [o for o in tensors_in(self.fwd.output) if o.requires_grad]
        self.grad_outputs = [torch.empty_like(o) for o in self.req]
        self.bwd = capture_planned(mode, backward, pool)


def _seeded(like: list[Any]) -> list[Any]:
    import torch

    if not like:
        return []
    gen = torch.Generator(device=like[0].device)
    gen.manual_seed(0)
    return [torch.randn(o.shape, generator=gen, device=o.device, dtype=o.dtype) for o in like]


def compare_callables(graphed: Callable[..., Any], args: tuple, surface: list[Any],
                      names: list[str], alt: PlannedCallables
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(forward parts, backward parts): torch's graphed function against the re-captured
    pair, for the same inputs and the same seeded output gradients."""
    import torch

    rng = StateSnapshot((), torch.device("cuda", torch.cuda.current_device()))
    with torch.enable_grad():
        outs = tensors_in(graphed(*args))
        req = [o for o in outs if o.requires_grad]
        seeds = _seeded(req)
        grads = torch.autograd.grad(req, surface, grad_outputs=seeds, allow_unused=True)
        o1, g1 = clone_all(outs), [g.detach().clone() if g is not None else None for g in grads]
    rng.restore()  # dropout draws the same masks in both
    alt.fwd.graph.replay()
    for static, seed in zip(alt.grad_outputs, seeds):
        static.copy_(seed)
    alt.bwd.graph.replay()
    torch.cuda.synchronize()
    tried = list(alt.bwd.output) if alt.bwd.output is not None else []
    pairs, missing = grad_pairs(dict(zip(names, tried)), dict(zip(names, g1)))
    return ({"outputs": compare_values(alt.fwd.output, o1, KIND)},
            {"gradients": compare_named(pairs, KIND, missing)})


def try_streams_callables(model: Any, graphed: Callable[..., Any], args: tuple,
                          graphs: list[Any], exec_ids: list[int], n: int, replays: int,
                          warmup: int) -> list[dict[str, Any]]:
    """``what_if_streams`` of the forward and of the backward graph (``graphs``, torch's,
    exec ids ``exec_ids``): the pair re-captured over ``n`` streams, compared, timed.
    Failures are reported in both entries (``error``), not raised."""
    inputs = [(f"input[{i}]", a) for i, a in enumerate(tensors_in(args)) if a.requires_grad]
    params = [(_name(n), p) for n, p in getattr(model, "named_parameters", lambda: ())()
              if p.requires_grad]
    names = [n for n, _ in inputs + params]
    surface = [t for _, t in inputs + params]
    try:
        alt = PlannedCallables(original_forward(model), args, surface, n, warmup)
    except Exception as exc:
        return [{"max_streams": n, "error": one_line(exc)}] * 2
    try:
        fwd_parts, bwd_parts = compare_callables(graphed, args, surface, names, alt)
        pairs = [(graphs[0], alt.fwd.graph), (graphs[1], alt.bwd.graph)]
        cols = trace_alternated(pairs, replays)
        return [{**timing(eid, exec_id_of(cap.graph), cols, cap, replays, n),
                 **summary(parts, KIND)}
                for eid, cap, parts in ((exec_ids[0], alt.fwd, fwd_parts),
                                        (exec_ids[1], alt.bwd, bwd_parts))]
    except Exception as exc:
        return [{"max_streams": n, "error": "measuring: " + one_line(exc)}] * 2
    finally:
        del alt


def ddp_refusal(model: Any) -> Optional[str]:
    """Why a model's step is not tried over more streams (None: it is)."""
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(model, DistributedDataParallel):
        return ("not tried: DistributedDataParallel's reducer runs its collectives on its own "
                "streams")
    return None

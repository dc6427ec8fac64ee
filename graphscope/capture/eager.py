"""``capture --eager-baseline``: the captured step run eagerly, under the same CUPTI activity
tracer, so that the bundle can say what graphing changed (graphscope/analysis/eager.py).

Two kinds of eager runs, after the graph's traced replays:

- *Timed* runs: the step exactly as the program would run it (no hooks), each followed by a
  device synchronize; the same is done for the graph's replays (``replay(); synchronize()``).
  Their host wall times are the step's cost with and without graphing, launch cost included.
  The kernels' GPU time is taken from the same timed runs, under the tracer.
- *Attributed* runs: the same step with module scopes open, to say which module launched each
  eager kernel. Eager kernels are not graph nodes, so the recorder's scope ids do not reach
  them; the activity record's **correlation id** does. CUPTI gives every CUDA API call of the
  process the next correlation id and the kernel record carries its launch's id, so ordering
  records by correlation id puts them in launch order. Each scope change (a module's forward
  entered or left, its backward entered or left, the loss, the optimizer) launches a one-element
  fill on a private *marker stream*: the markers' records sit in that order between the model's
  kernels, and all records between two markers belong to the scope the first one opened. The
  markers are told apart exactly by their stream (no model work runs on it), found as the
  stream of the first record of the window (a marker launched before the step). They run
  beside the model's stream, not in it, and the timed runs have none.

Naming is the capture's (:func:`graphscope.annotate.modules.module_fqn`: ``L``, ``L.<path>``,
``(loss)``, ``(step)``, ``(optimizer)``). Backward: by the capture's own rule
(``graphscope/annotate/backward.py``): each autograd node belongs to the scope open in forward
when autograd numbered it (its sequence number against the counter noted at every scope change,
so the nodes a composite op makes inside itself count too); an ``AccumulateGrad`` node to its
parameter's module; a node made outside every scope to the scope around ``backward()``
(``(loss)``/``(step)``). When backward starts (torch's ``_engine_run_backward``, wrapped for the
attributed run only) every node about to run gets a pre-hook that *sets* the backward scope, so
the engine's gradient accumulation after a node stays in that node's scope, as in the capture.
"""

from __future__ import annotations

import bisect
import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

import numpy as np

from .. import native
from .._errors import CaptureError
from ..annotate.modules import module_fqn
from ..annotate.training import OPTIMIZER_SCOPE, param_owners
from ..model.graph import UNATTRIBUTED, short_kernel_name
from ..model.join import KINDS
from .source import ModelJob
from .step import LOSS_SCOPE, STEP_SCOPE, unwrap_ddp, zero_grad

EAGER_VERSION = 1
OUTSIDE = UNATTRIBUTED  # eager work launched outside every scope (as graph nodes are)

# (module, phase) opened; (module, phase, SET): the innermost one replaced by it (a backward
# node starting); None: the innermost one closed
Scope = Optional[tuple[str, ...]]
SET = "set"


class Markers:
    """Scope changes as one-element fills on a private stream, in launch order; ``forward``
    is the stack of forward scopes open now, and ``owners`` the autograd sequence numbers at
    which it changed (who owns the autograd nodes made then)."""

    def __init__(self) -> None:
        import torch

        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            self.buf = torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        self.events: list[Scope] = []
        self.forward: list[str] = []
        self.seqs: list[int] = []
        self.owners: list[Optional[str]] = []
        self.around = OUTSIDE  # the scope of backward's unowned nodes, when none is open

    def mark(self, scope: Scope) -> None:
        import torch

        with torch.cuda.stream(self.stream):
            self.buf.fill_(1.0)
        self.events.append(scope)

    def open(self, name: str) -> None:
        self.forward.append(name)
        self.mark((name, "forward"))
        note_owner(self)

    def close(self) -> None:
        if self.forward:
            self.forward.pop()
        self.mark(None)
        note_owner(self)


def note_owner(marks: Any) -> None:
    """Autograd's sequence counter now and the forward scope that owns nodes numbered from
    it on."""
    from ..annotate.ownership import sequence_number

    marks.seqs.append(sequence_number())
    marks.owners.append(marks.forward[-1] if marks.forward else None)


def owner_of(marks: Any, seq: int) -> Optional[str]:
    """The forward scope open when autograd numbered a node ``seq`` (None: no scope)."""
    i = bisect.bisect_right(marks.seqs, seq) - 1
    return marks.owners[i] if i >= 0 else None


@contextlib.contextmanager
def _backward_hooks(marks: Any, params: dict[int, str]) -> Iterator[None]:
    """While the attributed run runs: each backward call's nodes get a pre-hook setting their
    owner's backward scope, bracketed by the scope around the call (``marks.forward``'s top, or
    ``marks.around``)."""
    import torch

    real = torch.autograd._engine_run_backward
    hooked: set[Any] = set()

    def hook_nodes(t_outputs: Any, around: str) -> None:
        stack = [t.grad_fn if isinstance(t, torch.Tensor) else getattr(t, "node", None)
                 for t in t_outputs]
        while stack:
            node = stack.pop()
            if node is None or node in hooked:
                continue
            hooked.add(node)
            if type(node).__name__ == "AccumulateGrad":
                var = getattr(node, "variable", None)
                owner = params.get(id(var)) if var is not None else None
            else:
                owner = owner_of(marks, int(node._sequence_nr()))
            scope = (owner or around, "backward", SET)
            node.register_prehook(lambda *_, s=scope: marks.mark(s))
            stack.extend(n for n, _ in node.next_functions)

    def run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        around = marks.forward[-1] if marks.forward else getattr(marks, "around", OUTSIDE)
        marks.mark((around, "backward"))
        try:
            hook_nodes(t_outputs, around)
            return real(t_outputs, *args, **kwargs)
        finally:
            marks.mark(None)

    # torch.autograd.backward (and Tensor.backward) call it by this module global, as the
    # capture's session patches it (graphscope/annotate/session.py)
    torch.autograd._engine_run_backward = run_backward
    try:
        yield
    finally:
        torch.autograd._engine_run_backward = real


def attribute(
    correlation: np.ndarray,
    stream: np.ndarray,
    kind: np.ndarray,
    names: Sequence[str],
    durations_ns: np.ndarray,
    events: Sequence[Scope],
) -> dict[tuple[str, str, str], list[int]]:
    """{(module, phase, kernel short name): [count, total ns]} of one traced window.

    The window's first kernel (by correlation id; records without one, id 0, aside) is a
    marker whose event is ``None`` (it opens nothing): its stream is the marker stream.
    ``names``: each record's kernel name (memcpy/memset records give their kind).
    """
    n = len(correlation)
    if n == 0:
        raise CaptureError("eager baseline: the tracer recorded no work in the eager step")
    corr = np.asarray(correlation, dtype=np.int64)
    order = np.argsort(corr, kind="stable")
    first = [i for i in order.tolist() if corr[i] > 0 and int(kind[i]) == 0][:1]
    if not first:
        raise CaptureError("eager baseline: no scope marker was traced")
    marker_stream = int(stream[first[0]])
    is_marker = np.asarray(stream) == marker_stream
    found = int(is_marker.sum())
    if found != len(events):
        raise CaptureError(f"eager baseline: {found} scope markers traced, {len(events)} "
                           "launched (records dropped, or the model uses the marker stream)")
    out: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    stack: list[tuple[str, str]] = []
    ev = iter(events)
    for i in order.tolist():
        if is_marker[i]:
            e = next(ev)
            if e is None:
                if stack:
                    stack.pop()
            elif len(e) > 2 and e[2] == SET:
                if stack:
                    stack[-1] = (e[0], e[1])
                else:
                    stack.append((e[0], e[1]))
            else:
                stack.append((e[0], e[1]))
            continue
        module, phase = stack[-1] if stack else (OUTSIDE, "forward")
        row = out[(module, phase, names[i])]
        row[0] += 1
        row[1] += int(durations_ns[i])
    return dict(out)


def record_names(rec: native.ActivityRecords) -> list[str]:
    """Each record's short kernel name, as the graph's nodes are named (memcpy/memset: the
    kind)."""
    short = [short_kernel_name(native.demangle(s)) for s in rec.names]
    kinds, idx = rec.kind.tolist(), rec.name_idx.tolist()
    return [short[j] if k == 0 and 0 <= j < len(short) else KINDS.get(k, "?")
            for k, j in zip(kinds, idx)]


def _columns(out: list[native.ActivityRecords]) -> tuple[Any, ...]:
    recs = [r for r in out if len(r.correlation)]
    if not recs:
        z = np.zeros(0, np.int64)
        return z, z, z, [], z
    cat = [np.concatenate([getattr(r, k) for r in recs]).astype(np.int64)
           for k in ("correlation", "stream", "kind")]
    dur = np.concatenate([r.end_ns.astype(np.int64) - r.start_ns.astype(np.int64)
                          for r in recs])
    names = [n for r in recs for n in record_names(r)]
    return cat[0], cat[1], cat[2], names, dur


@contextlib.contextmanager
def _scopes(job: ModelJob, marks: Markers, backward: bool = True) -> Iterator[None]:
    """Global module hooks, backward-node hooks (``backward``) and optimizer hooks (``step``
    and ``zero_grad``, as the capture's) that mark scope changes, named as the capture names
    them; removed on every path."""
    import torch
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o

    names: dict[int, str] = {}
    for path, mod in unwrap_ddp(job.model).named_modules():
        level = 0 if not path else path.count(".") + 1
        if job.depth is None or level <= job.depth:
            names[id(mod)] = module_fqn(path)
    opened: list[bool] = []

    def pre(mod: Any, *_: Any) -> None:
        name = names.get(id(mod))
        opened.append(name is not None)
        if name is not None:
            marks.open(name)

    def post(mod: Any, *_: Any) -> None:
        if opened and opened.pop():
            marks.close()

    handles = [m.register_module_forward_pre_hook(pre),
               m.register_module_forward_hook(post, always_call=True),
               o.register_optimizer_step_pre_hook(lambda *_: marks.mark((OPTIMIZER_SCOPE,
                                                                         "optimizer"))),
               o.register_optimizer_step_post_hook(lambda *_: marks.mark(None))]
    real_zero = o.Optimizer.zero_grad

    def zero_grad(self: Any, *a: Any, **k: Any) -> Any:  # its fills: optimizer work, as captured
        marks.mark((OPTIMIZER_SCOPE, "optimizer"))
        try:
            return real_zero(self, *a, **k)
        finally:
            marks.mark(None)

    o.Optimizer.zero_grad = zero_grad  # type: ignore[method-assign]
    try:
        if backward and torch.is_grad_enabled():
            with _backward_hooks(marks, param_owners(unwrap_ddp(job.model), job.depth)):
                yield
        else:
            yield
    finally:
        o.Optimizer.zero_grad = real_zero  # type: ignore[method-assign]
        for h in handles:
            h.remove()


def _attributed_step(job: ModelJob, marks: Markers) -> Callable[[], Any]:
    """The step of ``--mode step`` with the loss / user-step scopes marked as captured."""
    if job.step is not None:
        fn, model, args, kwargs = job.step, job.model, job.args, job.kwargs

        def user() -> Any:
            marks.open(STEP_SCOPE["module_name"])
            try:
                return fn(model, *args, **kwargs)
            finally:
                marks.close()

        return user

    import torch

    def default() -> Any:
        zero_grad(job.model)
        out = job.model(*job.args, **job.kwargs)
        marks.open(LOSS_SCOPE["module_name"])
        loss = job.loss_fn(out)
        # the gradient seed, made here as backward() would make it (torch.autograd's
        # _make_grads: ones_like of a one-element loss): the capture gives it to the loss's
        # forward, the autograd engine has not started yet
        seed = (torch.ones_like(loss, memory_format=torch.preserve_format)
                if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None)
        marks.close()
        marks.around = LOSS_SCOPE["module_name"]  # backward's nodes made outside every module
        loss.backward(seed)

    return default


def parts_of(job: ModelJob, mode: str, graph_names: Sequence[str]
             ) -> list[tuple[str, Callable[[], Any]]]:
    """(graph name, one eager run of what that graph holds), in replay order."""
    import functools

    import torch

    from .step import step_of

    if mode == "step":
        return [(graph_names[0], step_of(job))]
    if mode == "forward":
        sets = list(job.buckets) or [(job.args, job.kwargs)]

        def fwd(args: tuple, kwargs: dict) -> Any:
            with torch.inference_mode():
                return job.model(*args, **kwargs)

        return [(name, functools.partial(fwd, a, kw)) for name, (a, kw) in zip(graph_names, sets)]
    raise CaptureError(f"--eager-baseline takes --mode step or forward, not {mode!r}")


def _wall(fn: Callable[[], Any], n: int) -> list[int]:
    import torch

    torch.cuda.synchronize()
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter_ns() - t)
    return out


def eager_baseline(job: ModelJob, mode: str, graph_names: Sequence[str],
                   replay: Callable[[], None], runs: int) -> dict[str, Any]:
    """The eager.json document: timed eager runs and graph replays, and per graph the eager
    kernels attributed to (module, phase) over ``runs`` attributed runs."""
    import torch

    runs = max(runs, 1)
    parts = parts_of(job, mode, graph_names)

    def whole() -> None:
        for _, fn in parts:
            fn()

    whole()  # one untimed run of each (as the graph's first replay is untraced)
    replay()
    torch.cuda.synchronize()
    graph_wall = _wall(replay, runs)
    eager_wall = _wall(whole, runs)
    gpu = []
    for _ in range(runs):
        with native.tracing() as out:
            whole()
            torch.cuda.synchronize()
        _, _, _, _, dur = _columns(out)
        gpu.append(int(dur.sum()))
    rows: list[dict[str, Any]] = []
    for name, _ in parts:
        counts = _attributed(job, mode, name, parts, runs)
        for (module, phase, kernel), (count, ns) in sorted(counts.items()):
            rows.append({"graph": name, "module": module, "phase": phase, "kernel": kernel,
                         "count": count, "ns": ns})
    doc: dict[str, Any] = {
        "eager_version": EAGER_VERSION, "mode": mode, "runs": runs,
        "graphs": list(graph_names), "graph_wall_ns": graph_wall, "eager_wall_ns": eager_wall,
        "eager_gpu_ns": gpu, "kernels": rows,
        "backward_attribution": "autograd node" if mode == "step" else "none",
        "marker": "correlation-ordered fills on a private stream (capture/eager.py)",
    }
    return doc


def _attributed(job: ModelJob, mode: str, name: str,
                parts: Sequence[tuple[str, Callable[[], Any]]], runs: int
                ) -> dict[tuple[str, str, str], list[int]]:
    """``runs`` attributed runs of graph ``name``'s eager part, summed."""
    import torch

    total: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for _ in range(runs):
        marks = Markers()
        fn = _attributed_step(job, marks) if mode == "step" else dict(parts)[name]
        with _scopes(job, marks, backward=mode == "step"):
            with native.tracing() as out:
                marks.mark(None)  # the window's first record: names the marker stream
                fn()
                torch.cuda.synchronize()
        corr, stream, kind, names, dur = _columns(out)
        for key, (c, ns) in attribute(corr, stream, kind, names, dur, marks.events).items():
            total[key][0] += c
            total[key][1] += ns
    return dict(total)

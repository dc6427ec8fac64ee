"""``capture --try-streams N``: the what-if of the diagnosis, measured. Each forward graph is
captured a second time with its independent ops spread over up to N streams, and that graph's
replays are traced beside the one-stream graph's, alternated, in one window (``--replays`` of
each).

The diagnosis (analysis/diagnosis.py) bounds what more streams could gain from the captured
DAG and the ops' memory ranges; that bound leaves out what side-by-side kernels cost each
other (SMs, memory, the scheduler). This measures it: the same model code, the same inputs,
on more streams.

Which stream an op runs on (:class:`Planner`, pure): an op continues the stream whose last op
produced one of its inputs (the latest such producer); an op none of whose producers is the
last op of its stream (a fork: the first op of an independent branch, or an op that needs
nothing produced in the graph) takes an unused stream, else the stream whose last op is
oldest. Before an op runs, its stream waits (on the event recorded after that op; in a
capture an event only marks an edge's source, it adds no node) for: the last writer of each
storage it reads or writes, and the readers since that write of each storage it writes; per
other stream only its latest such op, and not again what an earlier wait covered. Storages
are keyed by their base address: a block the caching allocator hands out again starts a new
history (its outputs reset it). Tensors used on a stream other than the one that produced
them are ``record_stream``-ed so the allocator keeps their blocks from that stream's later
allocations (inside a capture it defers those until the capture ends). An op whose returns
the schema annotates as aliases is a view *or a copy* (``reshape``, ``contiguous``, ``to``
copy when no view can be made): it runs on the stream that made its input, and counts as an
op only when it returned new storage. Ops that touch no CUDA tensor run where they are.

The side streams are forked from the capture stream when the capture starts (each waits on
it once) and joined back at its end; cuBLAS gives each stream its own workspace (PyTorch
keys handles and workspaces by stream), which is what makes the split safe where deleting
an edge inside one stream's graph is not (a workspace shared by two GEMMs: the diagnosis
docstring). The model runs once eagerly under the same plan first (streams, handles and
workspaces made outside the capture), then is captured. The two graphs' outputs are
compared after their last replays: a difference means an ordering the plan missed (or a
nondeterministic model) and is reported, not hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..annotate.tensors import storage_key, tensors_in
from .alternate import exec_id_of, median, node_medians, one_line, spans_of, trace_alternated
from .compare import compare_values, summary

WHAT_IF_KEY = "what_if_streams"  # the graph's info key (graph.json)


@dataclass
class Planner:
    """Stream choice and waits for a sequence of ops, from the storages they read and write
    (module docstring). Stream 0 is the capture stream."""

    streams: int
    tail: list[int] = field(default_factory=list)  # per stream: its last op (-1: none yet)
    stream_of: list[int] = field(default_factory=list)  # per op
    writer: dict[int, int] = field(default_factory=dict)  # storage -> last writing op
    readers: dict[int, set[int]] = field(default_factory=dict)  # storage -> ops since write
    waited: dict[tuple[int, int], int] = field(default_factory=dict)  # (s, t) -> op of t
    waits: int = 0

    def __post_init__(self) -> None:
        if self.streams < 1:
            raise ValueError("a plan needs at least one stream")
        self.tail = [-1] * self.streams

    def place(self, reads: Iterable[int], writes: Iterable[int],
              stream: Optional[int] = None) -> tuple[int, list[int]]:
        """The next op's stream and the ops (on other streams) it must wait for first: the
        caller waits on the event it recorded after each; call :meth:`done` after the op
        ran. ``stream``: place it there (an op that may be a view or a copy)."""
        reads, writes = list(reads), list(writes)
        preds = {self.writer[k] for k in (*reads, *writes) if k in self.writer}
        for k in writes:
            preds |= self.readers.get(k, set())
        tails = [p for p in preds if self.tail[self.stream_of[p]] == p]
        if stream is not None:
            s = stream
        elif tails:
            s = self.stream_of[max(tails)]
        else:
            unused = [i for i, t in enumerate(self.tail) if t < 0]
            s = unused[0] if unused else min(range(self.streams), key=self.tail.__getitem__)
        last: dict[int, int] = {}  # other stream -> its latest op this one needs
        for p in preds:
            t = self.stream_of[p]
            if t != s and p > last.get(t, -1):
                last[t] = p
        wait = []
        for t, p in sorted(last.items()):
            if self.waited.get((s, t), -1) < p:  # stream order covers what was waited for
                self.waited[(s, t)] = p
                wait.append(p)
        self.waits += len(wait)
        return s, sorted(wait)

    def done(self, stream: int, reads: Iterable[int], writes: Iterable[int],
             outputs: Iterable[int]) -> int:
        """Note the op just run on ``stream``; returns its index."""
        op = len(self.stream_of)
        self.stream_of.append(stream)
        self.tail[stream] = op
        for k in reads:
            self.readers.setdefault(k, set()).add(op)
        for k in (*writes, *outputs):  # a fresh block or an in-place write: a new history
            self.writer[k] = op
            self.readers[k] = set()
        return op

    def producer_stream(self, key: int) -> int:
        """The stream whose op last wrote storage ``key`` (0: written outside the plan)."""
        op = self.writer.get(key)
        return 0 if op is None else self.stream_of[op]

    def used(self) -> int:
        return sum(1 for t in self.tail if t >= 0)


def _key(t: Any, device_type: str = "cuda") -> Optional[int]:
    """A tensor's storage on ``device_type`` (the plan's unit of memory), or None: on another
    device, empty or without storage."""
    if t.device.type != device_type or t.is_sparse or t.numel() == 0:
        return None
    return storage_key(t) or None


# Ops whose schema does not mark arguments they write: the batch norms update their running
# statistics in place when ``training`` is true (``Tensor? running_mean``, unannotated).
UNMARKED_WRITES = {
    "native_batch_norm": ("running_mean", "running_var"),
    "cudnn_batch_norm": ("running_mean", "running_var"),
    "miopen_batch_norm": ("running_mean", "running_var"),
}


def _arg(a: Any, i: int, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    return args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)


def _written_args(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments ``func`` writes: those its schema marks (``Tensor(a!)``: in-place,
    out=) and those :data:`UNMARKED_WRITES` names."""
    schema = func._schema
    unmarked = UNMARKED_WRITES.get(schema.name.split("::")[-1], ())
    if unmarked:
        values = {a.name: _arg(a, i, args, kwargs) for i, a in enumerate(schema.arguments)}
        if not values.get("training"):
            unmarked = ()
    out: list[Any] = []
    for i, a in enumerate(schema.arguments):
        alias = a.alias_info
        if a.name in unmarked or (alias is not None and alias.is_write):
            out += tensors_in(_arg(a, i, args, kwargs))
    return out


@dataclass
class OpAccess:
    """What one op call touches, by storage: ``reads`` (inputs it does not write), ``writes``
    (in place, out=), the input tensors, and whether it may be a view or a copy (every
    return annotated as an alias: it runs where its input was made)."""

    reads: list[int]
    writes: list[int]
    inputs: list[Any]
    written: list[Any]
    maybe_view: bool


def op_access(func: Any, args: Sequence[Any], kwargs: dict[str, Any],
              device_type: str = "cuda") -> Optional[OpAccess]:
    """The storages ``func(*args, **kwargs)`` reads and writes on ``device_type``; None for an
    op that touches no such tensor and makes none (nothing to order)."""
    ins = tensors_in((args, kwargs))
    written = _written_args(func, args, kwargs)
    wkeys = [k for t in written if (k := _key(t, device_type)) is not None]
    wids = {id(t) for t in written}
    rkeys = [k for t in ins if id(t) not in wids and (k := _key(t, device_type)) is not None]
    if not rkeys and not wkeys and not _makes(func, kwargs, device_type):
        return None
    maybe_view = not wkeys and all(r.alias_info is not None for r in func._schema.returns)
    return OpAccess(rkeys, wkeys, ins, written, maybe_view)


def _makes(func: Any, kwargs: dict[str, Any], device_type: str) -> bool:
    """A factory op (no tensor inputs) placing its result on ``device_type``."""
    dev = kwargs.get("device")
    return dev is not None and getattr(dev, "type", str(dev).split(":")[0]) == device_type


def plan_mode(n: int, device_type: str = "cuda") -> Any:
    """A ``TorchDispatchMode`` that runs each op on the stream a :class:`Planner` of ``n``
    streams picks (module docstring). Enter it where the capture stream is current: its
    ``__enter__`` forks the side streams from it, its ``__exit__`` joins them back. Its
    ``core`` (:class:`PlanCore`) holds the plan.

    Ops of a backward run inside it are planned too: autograd's engine runs them with the
    dispatch modes of the thread that called backward (its thread-local state), on its own
    thread; a lock keeps one op at a time in the plan. ``device_type="cpu"`` plans without
    streams (what tests read)."""
    if not _MODE_CLASS:
        from torch.utils._python_dispatch import TorchDispatchMode

        class PlanStreams(TorchDispatchMode):
            def __init__(self, core: PlanCore) -> None:
                super().__init__()
                self.core = core

            def __enter__(self) -> Any:
                self.core.enter()
                return super().__enter__()

            def __exit__(self, *exc: Any) -> Any:
                try:
                    self.core.exit()
                finally:
                    out = super().__exit__(*exc)
                return out

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                                   kwargs: Any = None) -> Any:
                return self.core.dispatch(func, args, kwargs or {})

        _MODE_CLASS.append(PlanStreams)
    return _MODE_CLASS[0](PlanCore(n, device_type))


_MODE_CLASS: list[Any] = []


class PlanCore:
    """The state of one :func:`plan_mode`: the plan of the capture under way (reset at each
    enter), an event per planned op, ``external`` (the tensors ops wrote in place that no
    planned op made: parameters, optimizer state, buffers, what a step changes) and ``log``
    (per planned op: its name, stream, waits, reads, writes and outputs)."""

    def __init__(self, n: int, device_type: str) -> None:
        import threading

        self.n = n
        self.device_type = device_type
        self.cuda = device_type == "cuda"
        if self.cuda:
            import torch

            self.side = [torch.cuda.Stream() for _ in range(n - 1)]
        else:
            self.side = []
        self.lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        self.plan = Planner(self.n)
        self.events: list[Any] = []
        self.external: dict[int, Any] = {}
        self.log: list[tuple[str, int, list[int], list[int], list[int], list[int]]] = []
        self.main: Any = None

    def enter(self) -> None:
        self.reset()
        if self.cuda:
            import torch

            self.main = torch.cuda.current_stream()
            for s in self.side:  # fork: part of the capture, ordered after nothing in it
                s.wait_stream(self.main)

    def exit(self) -> None:
        for s in self.side:  # join
            self.main.wait_stream(s)

    def stream(self, i: int) -> Any:
        return self.main if i == 0 else self.side[i - 1]

    def dispatch(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        acc = op_access(func, args, kwargs, self.device_type)
        if acc is None:
            return func(*args, **kwargs)  # nothing on the device: nothing to order
        with self.lock:
            return self._planned(func, args, kwargs, acc)

    def _planned(self, func: Any, args: Any, kwargs: dict[str, Any], acc: OpAccess) -> Any:
        plan = self.plan
        force = plan.producer_stream(acc.reads[0]) if acc.maybe_view and acc.reads else None
        s, waits = plan.place(acc.reads, acc.writes, force)
        for t in acc.written:
            k = _key(t, self.device_type)
            if k is not None and k not in plan.writer:
                self.external.setdefault(k, t)
        out = self._run(s, waits, acc, func, args, kwargs)
        wids = {id(t) for t in acc.written}
        okeys = [k for t in tensors_in(out) if id(t) not in wids
                 and (k := _key(t, self.device_type)) is not None and k not in acc.reads]
        if acc.maybe_view and not okeys:
            return out  # a view after all: no device work to order
        if self.cuda:
            import torch

            ev = torch.cuda.Event()  # in a capture: an edge source, no node
            ev.record(self.stream(s))
            self.events.append(ev)
        else:
            self.events.append(None)
        self.log.append((str(func), s, waits, acc.reads, acc.writes, okeys))
        plan.done(s, acc.reads, acc.writes, okeys)
        return out

    def _run(self, s: int, waits: list[int], acc: OpAccess, func: Any, args: Any,
             kwargs: dict[str, Any]) -> Any:
        """The op on stream ``s``, after the events of ``waits``; its inputs made on other
        streams ``record_stream``-ed to it."""
        if not self.cuda:
            return func(*args, **kwargs)
        import torch

        stream = self.stream(s)
        for p in waits:
            stream.wait_event(self.events[p])
        for t in acc.inputs:
            k = _key(t)
            if k is not None and self.plan.producer_stream(k) != s:
                try:
                    t.record_stream(stream)
                except RuntimeError:  # not the caching allocator's (from_blob, DLPack)
                    pass
        with torch.cuda.stream(stream):
            return func(*args, **kwargs)


@dataclass
class StreamsCapture:
    graph: Any  # torch.cuda.CUDAGraph, instantiated
    output: Any
    streams_used: int
    ops: int
    waits: int
    external: list[Any] = field(default_factory=list)  # written in place, made outside


def capture_on_streams(run: Callable[[], Any], n: int, warmup: int = 1,
                       pool: Any = None) -> StreamsCapture:
    """``run`` (a forward under the caller's inference mode, or a whole training step)
    warmed up and captured with its ops planned over ``n`` streams: the warm-up runs under
    the same plan, so streams, cuBLAS handles and workspaces exist before the capture."""
    import torch

    mode = plan_mode(n)
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        for _ in range(max(warmup, 1)):
            with mode:
                run()
    torch.cuda.current_stream().wait_stream(warm)
    torch.cuda.synchronize()
    return capture_planned(mode, run, pool)


def capture_planned(mode: Any, run: Callable[[], Any], pool: Any = None) -> StreamsCapture:
    """One capture of ``run`` under ``mode`` (a :func:`plan_mode`, warmed up), instantiated."""
    import torch

    g = torch.cuda.CUDAGraph(keep_graph=True)  # instantiated below, as every capture here
    with torch.cuda.graph(g, pool=pool):
        with mode:
            out = run()
    g.instantiate()
    torch.cuda.synchronize()
    plan = mode.core.plan
    return StreamsCapture(g, out, plan.used(), len(plan.stream_of), plan.waits,
                          list(mode.core.external.values()))


def timing(exec_id: int, alt_exec_id: int, cols: Sequence[Any], alt: StreamsCapture,
           replays: int, max_streams: int) -> dict[str, Any]:
    """The measured part of a graph's ``what_if_streams``: both graphs' spans per replay
    (traced alternately, :func:`~.alternate.trace_alternated`) and the plan's size."""
    one, spans = spans_of(cols, exec_id), spans_of(cols, alt_exec_id)
    return {
        "max_streams": max_streams, "streams": alt.streams_used, "ops": alt.ops,
        "cross_stream_waits": alt.waits, "replays": replays,
        "one_stream_span_ns": one, "span_ns": spans,
        "median_one_stream_ns": median(one), "median_ns": median(spans),
        "nodes": tried_nodes(cols, exec_id, alt_exec_id),
    }


def tried_nodes(cols: Sequence[Any], exec_id: int, alt_exec_id: int) -> dict[str, Any]:
    """Node by node, the tried graph beside the captured one in the same alternated window
    (each node's median start in its replay and median duration): what the what-if's
    per-node durations are checked against. The tried graph's nodes are the captured graph's
    ops in capture order (a plan moves ops between streams, it adds none): ``aligned`` says
    whether its kernels are the captured graph's, local id by local id."""
    one, tried = node_medians(cols, exec_id), node_medians(cols, alt_exec_id)
    aligned = one["local_id"] == tried["local_id"] and one["name"] == tried["name"]
    return {"aligned": aligned,
            "one_stream": {k: one[k] for k in ("local_id", "start_ns", "duration_ns")},
            "tried": {k: tried[k] for k in ("local_id", "start_ns", "duration_ns")}}


def try_streams(run: Callable[[], Any], graph: Any, exec_id: int, output: Any, n: int,
                replays: int) -> dict[str, Any]:
    """A forward graph's ``info`` entry: ``run`` captured over ``n`` streams and measured
    beside ``graph``, outputs compared (after one more replay of each, from the same static
    inputs); a capture that fails is reported in it (``error``), not raised: the one-stream
    bundle stands without it."""
    import torch

    try:
        with torch.inference_mode():
            alt = capture_on_streams(run, n)
    except Exception as exc:  # torch.cuda.graph ended the capture; the process goes on
        return {"max_streams": n, "error": one_line(exc)}
    try:
        cols = trace_alternated([(graph, alt.graph)], replays)
        out = timing(exec_id, exec_id_of(alt.graph), cols, alt, replays, n)
        graph.replay()
        alt.graph.replay()
        torch.cuda.synchronize()
        parts = {"outputs": compare_values(alt.output, output, "reordered")}
        return {**out, **summary(parts, "reordered")}
    except Exception as exc:  # the tracer refused (a profiler active) or a replay failed
        return {"max_streams": n, "error": "measuring: " + one_line(exc)}
    finally:
        del alt

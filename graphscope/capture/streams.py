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

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from .. import native
from ..annotate.tensors import storage_key, tensors_in

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


def _key(t: Any) -> Optional[int]:
    """A CUDA tensor's storage (the plan's unit of memory), or None: not on the GPU, empty or
    without storage."""
    if t.device.type != "cuda" or t.is_sparse or t.numel() == 0:
        return None
    return storage_key(t) or None


def _written_args(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments ``func``'s schema marks as written (``Tensor(a!)``: in-place, out=)."""
    out: list[Any] = []
    for i, a in enumerate(func._schema.arguments):
        alias = a.alias_info
        if alias is None or not alias.is_write:
            continue
        v = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
        out += tensors_in(v)
    return out


def plan_mode(n: int) -> Any:
    """A ``TorchDispatchMode`` that runs each op on the stream a :class:`Planner` of ``n``
    streams picks (module docstring). Enter it where the capture stream is current: its
    ``__enter__`` forks the side streams from it, its ``__exit__`` joins them back."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class PlanStreams(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.side = [torch.cuda.Stream() for _ in range(n - 1)]
            self.plan = Planner(n)
            self.events: list[Any] = []  # per planned op: recorded on its stream after it
            self.main: Any = None

        def __enter__(self) -> Any:
            self.plan = Planner(n)
            self.events = []
            self.main = torch.cuda.current_stream()
            for s in self.side:  # fork: part of the capture, ordered after nothing in it
                s.wait_stream(self.main)
            return super().__enter__()

        def __exit__(self, *exc: Any) -> Any:
            try:
                for s in self.side:  # join
                    self.main.wait_stream(s)
            finally:
                out = super().__exit__(*exc)
            return out

        def stream(self, i: int) -> Any:
            return self.main if i == 0 else self.side[i - 1]

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            ins = tensors_in((args, kwargs))
            written = _written_args(func, args, kwargs)
            wkeys = [k for k in map(_key, written) if k is not None]
            wids = {id(t) for t in written}
            rkeys = [k for t in ins if id(t) not in wids and (k := _key(t)) is not None]
            if not rkeys and not wkeys and not _makes_cuda(func, kwargs):
                return func(*args, **kwargs)  # no CUDA tensor in or out: nothing to order
            # Returns all annotated as aliases: a view, or a copy where a view cannot be
            # made (reshape, contiguous, to): run where its input was made, after it.
            maybe_view = not wkeys and all(r.alias_info is not None
                                           for r in func._schema.returns)
            force = self.plan.producer_stream(rkeys[0]) if maybe_view and rkeys else None
            s, waits = self.plan.place(rkeys, wkeys, force)
            stream = self.stream(s)
            for p in waits:
                stream.wait_event(self.events[p])
            for t in ins:
                k = _key(t)
                if k is not None and self.plan.producer_stream(k) != s:
                    try:
                        t.record_stream(stream)
                    except RuntimeError:  # not the caching allocator's (from_blob, DLPack)
                        pass
            with torch.cuda.stream(stream):
                out = func(*args, **kwargs)
            outs = tensors_in(out)
            okeys = [k for t in outs if id(t) not in wids and (k := _key(t)) is not None
                     and k not in rkeys]
            if maybe_view and not okeys:
                return out  # a view after all: no GPU work to order
            ev = torch.cuda.Event()  # in a capture: an edge source, no node
            ev.record(stream)
            self.events.append(ev)
            self.plan.done(s, rkeys, wkeys, okeys)
            return out

    return PlanStreams()


def _makes_cuda(func: Any, kwargs: dict[str, Any]) -> bool:
    """A factory op (no tensor inputs) placing its result on a CUDA device."""
    dev = kwargs.get("device")
    return dev is not None and getattr(dev, "type", str(dev).split(":")[0]) == "cuda"


@dataclass
class StreamsCapture:
    graph: Any  # torch.cuda.CUDAGraph, instantiated
    output: Any
    streams_used: int
    ops: int
    waits: int


def capture_on_streams(run: Callable[[], Any], n: int, warmup: int = 1) -> StreamsCapture:
    """``run`` (the forward, under the caller's inference/no-grad mode) warmed up and captured
    with its ops planned over ``n`` streams."""
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
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with mode:
            out = run()
    torch.cuda.synchronize()
    return StreamsCapture(g, out, mode.plan.used(), len(mode.plan.stream_of), mode.plan.waits)


def _spans(cols: Sequence[native.ActivityRecords], exec_id: int) -> list[int]:
    """Per replay (launch) of the exec graph ``exec_id``: first node start to last node end."""
    if not cols:
        return []
    gnid = np.concatenate([c.graph_node_id for c in cols]).astype(np.uint64)
    lc = np.concatenate([c.correlation for c in cols])  # the launch's, on all its nodes
    st = np.concatenate([c.start_ns for c in cols]).astype(np.int64)
    en = np.concatenate([c.end_ns for c in cols]).astype(np.int64)
    mine = (gnid >> np.uint64(32)) == np.uint64(exec_id)
    out: list[int] = []
    for launch in np.unique(lc[mine]).tolist():
        sel = mine & (lc == launch)
        out.append(int(en[sel].max() - st[sel].min()))
    return out


def _exec_ids(cols: Sequence[native.ActivityRecords]) -> set[int]:
    ids: set[int] = set()
    for c in cols:
        ids |= set((c.graph_node_id.astype(np.uint64) >> np.uint64(32)).tolist())
    return ids - {0}


def _compare(a: Any, b: Any) -> tuple[bool, Optional[float]]:
    """(bitwise equal, the largest absolute difference of floating-point outputs or None
    when their structure differs)."""
    import torch

    ta, tb = tensors_in(a), tensors_in(b)
    if len(ta) != len(tb) or any(x.shape != y.shape for x, y in zip(ta, tb)):
        return False, None
    equal = all(bool(torch.equal(x, y)) for x, y in zip(ta, tb))
    diff = max((float((x.float() - y.float()).abs().max()) for x, y in zip(ta, tb)
                if x.is_floating_point() and x.numel()), default=0.0)
    return equal, diff


def measure(graph: Any, exec_id: int, output: Any, alt: StreamsCapture, replays: int,
            max_streams: int) -> dict[str, Any]:
    """Trace ``replays`` replays of each graph, alternated (ABBA...), and compare their
    outputs (after one more replay of each, from the same static inputs)."""
    import torch

    graph.replay()
    alt.graph.replay()
    torch.cuda.synchronize()
    with native.tracing() as cols:
        for i in range(replays):  # back to back, as the timed replays: no idle GPU between
            first, second = (graph, alt.graph) if i % 2 == 0 else (alt.graph, graph)
            first.replay()  # which goes first alternates too
            second.replay()
        torch.cuda.synchronize()
    one = _spans(cols, exec_id)
    others = _exec_ids(cols) - {exec_id}
    alt_spans = _spans(cols, others.pop()) if len(others) == 1 else []
    graph.replay()
    alt.graph.replay()
    torch.cuda.synchronize()
    equal, diff = _compare(output, alt.output)
    return {
        "max_streams": max_streams, "streams": alt.streams_used, "ops": alt.ops,
        "cross_stream_waits": alt.waits, "replays": replays,
        "one_stream_span_ns": one, "span_ns": alt_spans,
        "median_one_stream_ns": statistics.median(one) if one else None,
        "median_ns": statistics.median(alt_spans) if alt_spans else None,
        "outputs_equal": equal, "max_abs_diff": diff,
    }


def try_streams(run: Callable[[], Any], graph: Any, exec_id: int, output: Any, n: int,
                replays: int) -> dict[str, Any]:
    """The graph's ``info`` entry: ``run`` captured over ``n`` streams and measured beside
    ``graph``; a capture that fails is reported in it (``error``), not raised: the one-stream
    bundle stands without it."""
    import torch

    try:
        with torch.inference_mode():
            alt = capture_on_streams(run, n)
    except Exception as exc:  # torch.cuda.graph ended the capture; the process goes on
        return {"max_streams": n, "error": _one_line(exc)}
    try:
        return measure(graph, exec_id, output, alt, replays, n)
    except Exception as exc:  # the tracer refused (a profiler active) or a replay failed
        return {"max_streams": n, "error": "measuring: " + _one_line(exc)}
    finally:
        del alt


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"

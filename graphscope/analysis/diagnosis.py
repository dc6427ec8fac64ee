"""Why a graph takes the time it takes: critical path, where the span goes, false
serialization and concurrency. Pure functions of a loaded :class:`Bundle` (numpy, no torch).

Durations
    A node's duration is the median over the timed replays of its ``durations_ns`` (work
    nodes), else the median ``dur_ns`` of its events where the tracer kept any. A node with
    neither (empty, event record/wait, host nodes, ...) is taken as 0 ns; each graph's
    ``assumptions`` say how many were. Without timed replays nothing is measured: the
    critical path is the longest chain counted in nodes.

Critical path
    The longest path through the captured DAG (its edges) weighted by those durations:
    earliest starts forward in topological order, latest starts (that keep the length)
    backward; slack = latest - earliest start. The path is followed back from the
    last-finishing node through the predecessor whose finish is the node's earliest start.
    It is a model: it leaves out launch and dependency-resolution latency, which the
    measured span holds.

Per traced replay with events (then the median over those replays)
    span        first node start -> last node end (for a bundle of one graph: the median over
                every traced replay, ``replay_span_ns``; else over those with events)
    work        sum of the node durations (the DAG's weights)
    parallelism work / span (1.0: one node at a time)
    launch      host ``cudaGraphLaunch`` call start -> first node start, from timeline.json's
                ``launches`` (absent in older bundles: "launch latency not recorded"); where
                the GPU was still running an earlier replay (kept events, any graph) when
                the call started, from that replay's end instead: time queued behind earlier
                work is ``launch_queued_ns``, not launch latency
    dep_gap     per node with timed predecessors: its start - its last predecessor's end
                (dependency-resolution latency), summed
    idle        span - time with at least one node running
    concurrent  time with two or more nodes running
    tail        this replay's last node end -> the next replay's launch (its first node
                when launches are not recorded, or when the launch came before this end),
                where that next replay is known (below)

Between replays
    Replays with events are ordered on their one clock. The gap between two consecutive ones
    counts only where no replay without events can lie in it: not where a launch record of a
    replay without events falls between them, and not where some graph has more replays than
    are known (kept events or launch records) and its last known one is not after the gap
    (its other replays run after it; its skipped ones, manifest ``skip_replays``, before its
    first). Eager kernels outside graphs are not recorded: a gap is time in which the GPU
    runs no graph node.

Verdicts (only where the numbers support them; thresholds below)
    "launch/dependency-latency bound"  >= LATENCY_MIN_NODES work nodes, median work node
        < LATENCY_NODE_NS, and idle inside the span >= LATENCY_IDLE_PCT % of the span or the
        launch latency >= LATENCY_IDLE_PCT % of launch + span.
    "host bound between replays"  the median gap between consecutive replays is longer than
        the median replay span: the GPU waits for the host longer than it runs graphs. Only
        for ``graphscope run`` bundles whose manifest says ``traced_back_to_back`` (replays
        traced in one window, no synchronize between them): otherwise the gaps hold the
        tracer's own per-replay start, synchronize and flush (``run`` until then) or come
        from graphscope's own replay loop (``capture``), and ``between_replays`` says so in
        its ``note``.
    "serialized on one stream"  achieved parallelism < SERIAL_PARALLELISM while the DAG or
        the data DAG (below) allows work / critical path >= SERIAL_DAG_PARALLELISM; where the
        DAG allows it and the graph's events use several streams, "under-parallelized on its
        N streams".

False serialization
    Nodes may carry ``reads``/``writes``: [start, end) byte ranges of the memory their op read
    and wrote (graph.json; absent in older bundles). The *data DAG* holds the orderings a
    sequential run needs. Nodes are visited in a topological order of the captured DAG
    (capture order where that is one); all range ends, sorted once, cut memory into
    elementary segments, and per segment a node depends on the segment's last writer
    (read-after-write, write-after-write) and, when it writes, on the segment's readers since
    that write (write-after-read). Every conflicting ordered pair is then ordered through a
    chain of such edges: a transitive dependency a -> u -> v (a writes what v reads, u
    touches neither) is kept although neither captured edge is a conflict. A node without op
    information (``reads`` and ``writes`` absent) may touch any memory: it is a barrier that
    depends on every node since the previous barrier and that every later node depends on,
    so all its captured edges are kept; such nodes are counted. Captured edges between nodes
    the events put on different streams (an explicit event wait) are kept. A captured edge
    u -> v inside one stream (nodes without events count as that stream) is
    *stream-order-only* when v is not reachable from u in the data DAG plus the kept edges.
    The what-if critical path is that DAG's longest path with the same durations plus each
    node's measured dependency latency (its start - its last predecessor's end, median over
    replays; ``dependency_latency_ns`` sums them, ``path_with_latency_ns`` is the captured
    DAG's path so weighted): an upper bound on what running the independent chains on more
    streams could gain. It assumes the chains do not slow each other: kernels that share
    the GPU's SMs and memory run longer side by side (on the H200, two streams of small
    GEMMs: 4-12% longer kernels and 1.1 -> 1.9 us per-node latency), so the span measured
    on two streams lies above it. Two conflicting nodes the captured graph leaves unordered
    (a race in the program) are ordered by the visit order, which can only lengthen the
    what-if path.
    The what-if is about the chains on more streams, not about deleting the edges inside one:
    library workspaces are no op's argument (cuBLAS's belongs to the handle and the stream, and
    its split-K GEMMs zero and count in it), so two GEMMs of one stream share one while two
    streams get one each. Deleting such an edge in a one-stream graph hung the H200.
    The chains reported are the runs of one stream's nodes, in visit order, between
    stream-order-only edges (stream -1: nodes without events). Where no captured edge is
    stream-order-only the what-if path is the critical path itself.
    Measured (``capture --mode forward --try-streams N``, graph info ``what_if_streams``): the
    forward captured again with its independent ops over up to N streams (capture/streams.py)
    and traced alternately with the graph: ``what_if_measured`` holds both median spans, the
    gain, and how far the measured span lies above the bound (``above_bound_pct``: what
    side-by-side kernels cost each other), and whether the two graphs' outputs are equal.
    Cost: one sort of every (node, elementary segment, read/write) access, O(A log A), and
    running max/min sweeps over it (no pairwise interval tests); the reachability checks
    visit at most REACH_BUDGET nodes per graph, and edges left unchecked are counted
    (``unchecked_edges``), not listed (the what-if path does not depend on them).
"""

from __future__ import annotations

import gc
import statistics
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter
from typing import Any, Optional

import numpy as np

from ..model.bundle import Bundle
from ..model.graph import CapturedGraph
from .dag import EPS, Dag, longest
from .replays import (
    bundle_busy,
    busy_until,
    event_columns,
    events_by_graph,
    launches_of,
    node_gaps,
    replay_metrics,
)
from .stats import module_at
from .stream_order import serialization

LATENCY_NODE_NS = 5_000  # a "tiny" node: median work node shorter than this
LATENCY_IDLE_PCT = 10.0  # gaps this large a share of the span (with tiny nodes): latency bound
LATENCY_MIN_NODES = 10
SERIAL_PARALLELISM = 1.05  # achieved parallelism below this: one node at a time
SERIAL_DAG_PARALLELISM = 1.1  # ... while the DAG would allow at least this
TOP = 10  # near-critical nodes and chains listed


def _t(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms" if abs(ns) >= 1e6 else f"{ns / 1e3:.1f} µs"


def _median(xs: Sequence[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


def _node_durations(bundle: Bundle, dags: Optional[Sequence[Dag]] = None) -> dict[int, float]:
    """exec node id -> median duration over the timed replays, for work nodes. ``dags``: of
    ``bundle.graphs``, where the caller made them (their columns spare passes over the
    nodes)."""
    r = bundle.replays
    if not r:
        return {}
    if dags is None:
        ids = list(map(attrgetter("exec_node_id"), bundle.work))
        rows = list(map(attrgetter("durations_ns"), bundle.work))
    else:
        ids = [i for x in dags for i in x.exec_ids[x.is_work].tolist()]
        rows = [t for x in dags for t in compress(x.durations_ns, x.is_work.tolist())]
    if not rows:
        return {}
    if r > 0 and all(map(r.__eq__, map(len, rows))):
        # usual: ``bundle.durations`` without its padding, 2x faster (numpy's conversion of
        # 100,000 tuples is slow)
        mat = np.fromiter(chain.from_iterable(rows), np.int64, len(rows) * r).reshape(-1, r)
        return dict(zip(ids, np.median(mat, axis=1).tolist()))
    med = np.median(bundle.durations, axis=1).tolist()
    return {n.exec_node_id: m for n, m in zip(bundle.work, med) if n.durations_ns}


# Long on purpose (~110 lines): one graph's figures in the order the docstring defines them.
def diagnose_graph(bundle: Bundle, g: CapturedGraph,
                   durations: Optional[Mapping[int, float]] = None,
                   events: Optional[Sequence[Mapping[str, Any]]] = None,
                   launches: Optional[Mapping[tuple[str, int], tuple[int, int]]] = None,
                   busy: Optional[Mapping[tuple[str, int], int]] = None,
                   columns: Optional[tuple[np.ndarray, ...]] = None,
                   dag: Optional[Dag] = None) -> dict[str, Any]:
    """The diagnosis of one graph of ``bundle`` as plain data (module docstring).
    ``columns``: :func:`event_columns` of its events, ``dag``: ``Dag(g)``, where the caller
    made them."""
    if durations is None:
        durations = _node_durations(bundle)
    if events is None:
        events = events_by_graph(bundle).get(g.name, [])
    if launches is None:
        launches = launches_of(bundle)
    if dag is None:
        dag = Dag(g)
    n = dag.n
    is_work = dag.is_work
    out: dict[str, Any] = {"graph": g.name, "nodes": n, "edges": len(dag.src),
                           "work_nodes": int(is_work.sum()),
                           "assumptions": [], "verdicts": []}
    if dag.dropped:
        out["assumptions"].append(f"{dag.dropped} edge(s) naming no node of the graph (or a "
                                  "node itself) left out")
    if dag.order is None:
        out["error"] = "the edges form a cycle: no critical path"
        return out
    rp, pos, st, en, sm = (columns if columns is not None
                           else event_columns(events, dag.exec_ids))
    stream = np.full(n, -1, np.int64)
    o = np.argsort(rp, kind="stable")[::-1]  # the first replay's stream wins
    stream[pos[o]] = sm[o]
    d = list(map(durations.get, dag.exec_ids.tolist(), repeat(-1.0)))
    untimed: Counter[str] = Counter()
    missing = [i for i, x in enumerate(d) if x < 0]
    # this graph's own timing: a graph of a run bundle the program never replayed while
    # traced has none, whatever the bundle's other graphs have
    timed = len(missing) < len(d) or bool(len(rp))
    if missing:
        ev_med: dict[int, float] = {}
        if len(pos):
            miss = np.zeros(n, bool)
            miss[missing] = True
            need = miss[pos]
            by: dict[int, list[int]] = defaultdict(list)
            for i, x in zip(pos[need].tolist(), (en - st)[need].tolist()):
                by[i].append(x)
            ev_med = {i: float(statistics.median(v)) for i, v in by.items()}
        for i in missing:
            x = ev_med.get(i)
            if x is None:
                nd = g.nodes[i]
                untimed["work" if nd.is_work else nd.type] += 1
                x = 0.0 if timed else (1.0 if nd.is_work else 0.0)
            d[i] = x
    if not timed:
        out["assumptions"].append(
            ("not replayed while traced" if bundle.replays else "no timed replays")
            + ": each work node counted as 1 (lengths are node counts)")
    elif untimed:
        what = ", ".join(f"{k} {v}" for k, v in sorted(untimed.items()))
        out["assumptions"].append(f"nodes without timing taken as 0 ns ({what})")
    out["timed"] = timed
    length, path, slack = longest(dag.order, dag.succ, dag.pred, d, dag.src, dag.dst,
                                  rank=dag.rank)
    work = float(sum(d))
    mods = _module_sums(dag, path, d)
    on = np.zeros(n, bool)
    on[path] = True
    zero_off = int(((slack <= EPS) & ~on).sum())
    off = np.flatnonzero(~on & is_work)
    near = off[np.lexsort((off, slack[off]))][:TOP].tolist()
    unit = "ns" if timed else "nodes"  # a module's share of the path: time, or node count
    out["critical_path"] = {
        # untimed, lengths are node counts: in their own field, never in an _ns one
        "length_ns": length if timed else None, "nodes": dag.lids[path].tolist(),
        "exec_node_ids": dag.exec_ids[path].tolist(),
        "work_nodes": int(is_work[path].sum()) if path else 0,
        "modules": [{"module": m, unit: t, "pct": 100.0 * t / length if length else 0.0}
                    for m, t in sorted(mods.items(), key=lambda kv: (-kv[1], kv[0]))],
        "modules_rolled_up": _rolled_up(mods, length, unit),
    }
    if not timed:
        out["critical_path"]["length_nodes"] = int(round(length))
    out["slack"] = {
        "on_path": len(path), "zero_slack_off_path": zero_off,
        "off_path": n - len(path),
        "near_critical": [{"local_id": g.nodes[i].local_id, "slack_ns": float(slack[i]),
                           "name": g.nodes[i].short_name, "module": g.nodes[i].module}
                          for i in near],
    }
    out["slack_ns"] = dict(zip(dag.lids.tolist(), slack.tolist()))
    out["work_ns"] = work if timed else None
    out["dag_parallelism"] = work / length if length else None
    out["streams"] = len(set(sm.tolist()) - {-1})
    # where the span goes
    reps = _replays(g, dag, (rp, pos, st, en), launches, busy or {})
    out["replays"] = reps
    med = {k: _median([x[k] for x in reps if x[k] is not None])
           for k in ("span_ns", "idle_ns", "dep_gap_ns", "concurrent_ns", "launch_ns",
                     "launch_call_ns", "launch_queued_ns", "busy_ns")}
    out["median"] = med
    span = med["span_ns"]
    # a bundle of one graph has the span of every traced replay, not only of those with events
    whole = [float(x) for x in bundle.replay_span_ns if x] if len(bundle.graphs) == 1 else []
    out["span_ns"] = _median(whole) if whole else span
    out["span_replays"] = len(whole) if whole else len(reps)
    out["parallelism"] = work / out["span_ns"] if out["span_ns"] and timed else None
    idle, conc = med["idle_ns"] or 0.0, med["concurrent_ns"] or 0.0
    out["idle_pct"] = 100.0 * idle / span if span else None
    out["concurrency_pct"] = 100.0 * conc / span if span else None
    out["launch_latency_ns"] = med["launch_ns"]
    out["launch_recorded"] = any(x["launch_ns"] is not None for x in reps)
    if timed:
        out["serialization"] = _with_latency(g, dag, d, stream, (rp, pos, st, en),
                                             (length, path), work)
    wi = (g.info or {}).get("what_if_streams")
    if isinstance(wi, Mapping):
        out["what_if_measured"] = measured_what_if(wi, out)
    out["verdicts"] = _verdicts(out, np.asarray(d)[is_work])
    return out


def gain_words(pct: float) -> str:
    """A measured change of span in words: "-45%", "no gain" (under 1% either way), "+21%,
    slower"."""
    if pct >= 1.0:
        return f"-{pct:.0f}%"
    return "no gain" if pct > -1.0 else f"+{-pct:.0f}%, slower"


def differ_words(m: Mapping[str, Any]) -> str:
    """How a --try-streams graph's outputs differ from the graph's."""
    d = m.get("max_abs_diff")
    return "output structure differs" if d is None else f"max |diff| {d:.3g}"


def measured_what_if(wi: Mapping[str, Any], o: Mapping[str, Any]) -> dict[str, Any]:
    """``capture --try-streams``'s measurement (graph info ``what_if_streams``,
    capture/streams.py) beside this graph's bound: the spans of the graph re-captured over
    more streams and of the graph itself, traced alternately in one window (medians)."""
    if wi.get("error"):
        return {"max_streams": wi.get("max_streams"), "error": wi["error"]}
    one, alt = wi.get("median_one_stream_ns"), wi.get("median_ns")
    spread = {k: _quartiles(wi.get(f)) for k, f in (("one_stream_iqr_ns", "one_stream_span_ns"),
                                                     ("span_iqr_ns", "span_ns"))}
    ser = o.get("serialization") or {}
    ren = ser.get("renamed") or {}
    bound = (ser.get("what_if_ns") if ser.get("stream_order_only_edges")
             else ren.get("what_if_ns") if ren.get("stream_order_only_edges") else None)
    return {
        "max_streams": wi.get("max_streams"), "streams": wi.get("streams"),
        "ops": wi.get("ops"), "cross_stream_waits": wi.get("cross_stream_waits"),
        "replays": wi.get("replays"), "one_stream_ns": one, "span_ns": alt,
        "gain_pct": 100.0 * (1.0 - alt / one) if one and alt else None,
        "bound_ns": bound,
        # how far the measured span lies above the bound (contention the bound leaves out)
        "above_bound_pct": 100.0 * (alt / bound - 1.0) if alt and bound else None,
        "outputs_equal": wi.get("outputs_equal"), "max_abs_diff": wi.get("max_abs_diff"),
        **spread,
    }


def _quartiles(xs: Any) -> Optional[list[float]]:
    """[first, third] quartile of a list of spans, or None."""
    if not isinstance(xs, list) or len(xs) < 2:
        return None
    q = statistics.quantiles([float(x) for x in xs], n=4)
    return [q[0], q[2]]


def _rolled_up(mods: dict[str, float], length: float, unit: str = "ns", top: int = 4,
               cover: float = 60.0) -> list[dict[str, Any]]:
    """The critical path's module shares at the deepest module level whose ``top`` largest
    cover ``cover`` % of the path: two branches of 32 layers read ``L.left 50%, L.right 50%``,
    not 1% per layer. Pseudo modules (``(loss)``) stay whole."""
    if not length or not mods:
        return []

    def at(depth: int) -> list[tuple[str, float]]:
        out: dict[str, float] = {}
        for m, t in mods.items():
            key = module_at(m, depth)
            out[key] = out.get(key, 0.0) + t
        return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))

    deepest = max((m.count(".") for m in mods if not m.startswith("(")), default=0)
    chosen = at(0)
    for depth in range(deepest, -1, -1):
        rows = at(depth)
        if sum(t for _, t in rows[:top]) >= cover / 100.0 * length:
            chosen = rows
            break
    return [{"module": m, unit: t, "pct": 100.0 * t / length} for m, t in chosen
            if t >= 0.005 * length]  # under half a percent says nothing


def _module_sums(dag: Dag, path: list[int], d: list[float]) -> dict[str, float]:
    """Module -> the summed durations of ``path``'s nodes of that module (each module's
    durations added in path order, as a loop over the path would)."""
    if not path:
        return {}
    names = list(dict.fromkeys(dag.modules))
    code = dict(zip(names, range(len(names))))
    idx = np.fromiter(map(code.__getitem__, dag.modules), np.int64, dag.n)[path]
    sums = np.bincount(idx, weights=np.asarray(d)[path], minlength=len(names))
    on = np.bincount(idx, minlength=len(names)) > 0
    return dict(zip(compress(names, on.tolist()), sums[on].tolist()))


def _replays(g: CapturedGraph, dag: Dag, cols: tuple[np.ndarray, ...],
             launches: Mapping[tuple[str, int], tuple[int, int]],
             busy: Mapping[tuple[str, int], int]) -> list[dict[str, Any]]:
    """Per replay with events (``cols``: replay, position, start, end): where its span went."""
    rp, pos, st, en = cols
    reps: list[dict[str, Any]] = []
    if len(rp):
        srt = np.argsort(rp, kind="stable")
        rs = rp[srt]
        cut = np.flatnonzero(np.r_[True, rs[1:] != rs[:-1]])
        for r, part in zip(rs[cut].tolist(), np.split(srt, cut[1:])):
            m = replay_metrics(dag, pos[part], st[part], en[part], launches.get((g.name, r)),
                                busy.get((g.name, r)))
            m["replay"] = r
            reps.append(m)
    return reps


def _with_latency(g: CapturedGraph, dag: Dag, d: list[float], stream: np.ndarray,
                  cols: tuple[np.ndarray, ...], cp: tuple[float, list[int]],
                  work: float) -> dict[str, Any]:
    """The false-serialization analysis with each node's measured dependency latency (its
    start - its last predecessor's end, median over replays) in its weight: chains moved to
    other streams still pay it."""
    assert dag.order is not None
    lat = node_gaps(dag, *cols)
    d_lat, (lat_len, lat_path) = d, cp
    if lat.any():
        d_lat = (np.asarray(d) + lat).tolist()
        lat_len, lat_path, _ = longest(dag.order, dag.succ, dag.pred, d_lat, dag.src, dag.dst,
                                        slack=False, rank=dag.rank)
    out = serialization(g, dag, d_lat, stream, lat_len, lat_path, work)
    if out.get("op_info"):
        out["dependency_latency_ns"] = float(lat.sum())
        out["path_with_latency_ns"] = lat_len
    return out


def _verdicts(o: dict[str, Any], work_d: np.ndarray) -> list[str]:
    v: list[str] = []
    span = o.get("span_ns")
    if not span or not o.get("timed"):
        return v
    med_node = float(np.median(work_d)) if len(work_d) else 0.0
    launch = o["launch_latency_ns"]
    launch_share = 100.0 * launch / (launch + span) if launch and launch > 0 else 0.0
    if (len(work_d) >= LATENCY_MIN_NODES and med_node < LATENCY_NODE_NS
            and (o["idle_pct"] >= LATENCY_IDLE_PCT or launch_share >= LATENCY_IDLE_PCT)):
        v.append(f"launch/dependency-latency bound: {len(work_d)} work nodes of median "
                 f"{_t(med_node)}; {o['idle_pct']:.0f}% of the span is idle"
                 + (f", launch takes {launch_share:.0f}% of launch + span" if launch_share
                    else ""))
    par = o.get("parallelism")
    ser = o.get("serialization") or {}
    dag_par = o.get("dag_parallelism") or 0.0
    wi_par = ser.get("what_if_parallelism") or 0.0
    if par is not None and par < SERIAL_PARALLELISM:
        if dag_par >= SERIAL_DAG_PARALLELISM:
            where = ("serialized on one stream" if o.get("streams", 0) <= 1 else
                     f"under-parallelized on its {o['streams']} streams")
            v.append(f"{where}: the DAG allows {dag_par:.2f}x parallelism, "
                     f"the replay achieved {par:.2f}x")
        elif wi_par >= SERIAL_DAG_PARALLELISM:
            v.append(f"serialized on one stream: {ser['stream_order_only_edges']} "
                     f"stream-order-only edge(s); independent chains on more streams could "
                     f"take the critical path (with its measured latencies) from "
                     f"{_t(ser.get('path_with_latency_ns', o['critical_path']['length_ns']))}"
                     f" to {_t(ser['what_if_ns'])} (-{ser['gain_pct']:.0f}%)")
        elif ((ren := ser.get("renamed") or {}).get("what_if_parallelism") or 0.0
              ) >= SERIAL_DAG_PARALLELISM:
            v.append(f"serialized on one stream: {ren['stream_order_only_edges']} "
                     f"stream-order-only edge(s) once the caching allocator's block reuse is "
                     f"renamed (separate memory per chain); independent chains on more "
                     f"streams could take the critical path (with its measured latencies) from "
                     f"{_t(ser.get('path_with_latency_ns', o['critical_path']['length_ns']))} "
                     f"to {_t(ren['what_if_ns'])} (-{ren['gain_pct']:.0f}%)")
    m = o.get("what_if_measured") or {}
    if m.get("span_ns") and m.get("one_stream_ns"):
        v.append(f"measured on {m['streams']} stream(s) (--try-streams {m['max_streams']}): "
                 f"span {_t(m['span_ns'])} against {_t(m['one_stream_ns'])} on one stream in "
                 f"the same replays ({gain_words(m['gain_pct'])})"
                 + ("" if m.get("outputs_equal") else
                    f"; its outputs differ from the graph's ({differ_words(m)}): an ordering "
                    "the stream plan missed, or a nondeterministic model"))
    elif m.get("error"):
        v.append(f"--try-streams {m.get('max_streams')}: the capture over more streams "
                 f"failed: {m['error']}")
    return v


# ---------------------------------------------------------------- the bundle

def _between(bundle: Bundle, per_graph: list[dict[str, Any]],
             launches: Mapping[tuple[str, int], tuple[int, int]]) -> Optional[dict[str, Any]]:
    """Gaps between consecutive replays on the GPU (module docstring: which pairs count);
    fills each replay's ``tail_ns``."""
    iv: list[tuple[int, int, str, int, dict[str, Any]]] = []  # first, last, graph, replay
    iv.extend((m["first_ns"], m["last_ns"], o["graph"], m["replay"], m)
              for o in per_graph for m in o.get("replays", []))
    if len(iv) < 2:
        return None
    iv.sort(key=lambda x: (x[0], x[1]))
    # each known replay's place on the clock: its launch where recorded, else its first node
    ref = {k: v[0] for k, v in launches.items()}
    for a, _, gname, r, _ in iv:
        ref.setdefault((gname, r), a)
    kept_keys = {(gname, r) for _, _, gname, r, _ in iv}
    hidden = sorted(v for k, v in ref.items() if k not in kept_keys)  # launched, no events
    known: dict[str, list[int]] = defaultdict(list)
    for (gname, _), v in ref.items():
        known[gname].append(v)
    skip = bundle.manifest.get("skip_replays") or 0
    more = {}
    for g in bundle.graphs:
        total = g.info.get("replays") if isinstance(g.info.get("replays"), int) else None
        more[g.name] = (total if total is not None else bundle.replays) > len(known[g.name])
    first = {k: min(v) for k, v in known.items() if v}
    last = {k: max(v) for k, v in known.items() if v}
    gaps, host = [], []
    for x, y in zip(iv, iv[1:]):
        rx, ry = ref[(x[2], x[3])], ref[(y[2], y[3])]
        if any(more.get(k) and last[k] <= rx for k in last):
            continue  # a replay of k without events or launch record may run in between
        if skip and any(first[k] >= ry for k in first):
            continue  # a skipped replay of k may run in between
        i = bisect_right(hidden, rx)
        if i < len(hidden) and hidden[i] < y[0]:
            continue  # a replay launched in between (without events)
        gap = y[0] - x[1]
        lau = launches.get((y[2], y[3]))
        # launched while this replay still ran (queued): the GPU went on after y[0] - x[1]
        x[4]["tail_ns"] = (lau[0] if lau and lau[0] >= x[1] else y[0]) - x[1]
        gaps.append(gap)
        if lau:
            host.append(max(0, lau[0] - x[1]))
    if not gaps:
        return None
    # the graphs' median spans, as the diagnosis table shows them (one graph: its span)
    spans = [o["span_ns"] for o in per_graph if o.get("span_ns") is not None]
    out: dict[str, Any] = {
        "pairs": len(gaps), "median_gap_ns": _median(gaps), "max_gap_ns": max(gaps),
        "total_gap_ns": sum(gaps), "median_span_ns": _median(spans),
        "host_wait_median_ns": _median(host)}
    med_gap, med_span = out["median_gap_ns"], out["median_span_ns"]
    mode = bundle.manifest.get("mode")
    if mode != "run":
        out["note"] = ("the replays were driven by graphscope's own replay loop, not by the "
                       "program")
    elif not bundle.manifest.get("traced_back_to_back"):
        out["note"] = ("each traced replay was started, synchronized and flushed by graphscope's "
                       "tracer: the gaps hold that overhead besides the program's own time")
    elif med_gap is not None and med_span is not None and med_gap > med_span:
        out["verdict"] = (f"host bound between replays: the GPU runs no graph for "
                          f"{_t(med_gap)} between replays (median) against {_t(med_span)} of "
                          "replay span")
    return out


def diagnose(bundle: Bundle) -> dict[str, Any]:
    """The diagnosis of every graph of ``bundle`` and of the gaps between its replays.

    The cyclic garbage collector is held off while it runs, as :func:`read_bundle` does: the
    analysis makes large lists and no cycles, and each collection it set off rescanned every
    node object of a bundle built in memory (a capture's, or one nobody froze): 0.1 s of a
    100,000-node graph's ~1 s."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _diagnose(bundle)
    finally:
        if was:
            gc.enable()


def _diagnose(bundle: Bundle) -> dict[str, Any]:
    dags = [Dag(g) for g in bundle.graphs]
    durations = _node_durations(bundle, dags)
    events = events_by_graph(bundle)
    launches = launches_of(bundle)
    cols = {g.name: event_columns(events.get(g.name, []), dag.exec_ids)
            for g, dag in zip(bundle.graphs, dags)}
    spans = {k: (c[0], c[2], c[3]) for k, c in cols.items()}
    # a view of one graph: its launches queued behind every graph of the bundle it came from
    busy = busy_until(spans) if bundle.parent is None else bundle_busy(bundle.parent)
    graphs = [diagnose_graph(bundle, g, durations, events.get(g.name, []), launches, busy,
                             cols[g.name], dag) for g, dag in zip(bundle.graphs, dags)]
    between = _between(bundle, graphs, launches)
    for o in graphs:
        tails = [m["tail_ns"] for m in o.get("replays", []) if m["tail_ns"] is not None]
        o.setdefault("median", {})["tail_ns"] = _median(tails)
    several = len(graphs) > 1  # each verdict says whose it is
    verdicts = [f"{o['graph']}: {v}" if several else v for o in graphs for v in o["verdicts"]]
    if between and between.get("verdict"):
        verdicts.append(between["verdict"])
    return {
        "graphs": graphs,
        "between_replays": between,
        "launch_recorded": bool(getattr(bundle, "launches", ())),
        "verdicts": verdicts,
    }


def to_json(diag: Mapping[str, Any], per_node: bool = False) -> dict[str, Any]:
    """``diag`` for JSON output: per-node slack only with ``per_node`` (it has one entry per
    node), the rest as it is."""
    graphs = []
    for o in diag["graphs"]:
        o = dict(o)
        sl = o.pop("slack_ns", None)
        if per_node and sl is not None:
            o["slack_ns"] = {str(k): v for k, v in sl.items()}
        graphs.append(o)
    return {**diag, "graphs": graphs}

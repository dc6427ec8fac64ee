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
                ``launches`` (absent in older bundles: "launch latency not recorded")
    dep_gap     per node with timed predecessors: its start - its last predecessor's end
                (dependency-resolution latency), summed
    idle        span - time with at least one node running
    concurrent  time with two or more nodes running
    tail        this replay's last node end -> the next replay's launch (its first node
                when launches are not recorded), where that next replay is known (below)

Between replays
    Replays with events are ordered on their one clock. The gap between two consecutive ones
    counts only where no replay without events can lie in it: a graph with more replays than
    it kept events for runs its unkept replays after its last kept one (and its skipped
    ones, manifest ``skip_replays``, before its first). Eager kernels outside graphs are not
    recorded: a gap is time in which the GPU runs no graph node.

Verdicts (only where the numbers support them; thresholds below)
    "launch/dependency-latency bound"  >= LATENCY_MIN_NODES work nodes, median work node
        < LATENCY_NODE_NS, and idle inside the span >= LATENCY_IDLE_PCT % of the span or the
        launch latency >= LATENCY_IDLE_PCT % of launch + span.
    "host bound between replays"  the median gap between consecutive replays is longer than
        the median replay span: the GPU waits for the host longer than it runs graphs.
    "serialized on one stream"  achieved parallelism < SERIAL_PARALLELISM while the DAG or
        the data DAG (below) allows work / critical path >= SERIAL_DAG_PARALLELISM.

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
    The what-if critical path is that DAG's longest path with the same durations: an upper
    bound on what running the independent chains on more streams could gain (latencies
    unchanged). Two conflicting nodes the captured graph leaves unordered (a race in the
    program) are ordered by the visit order, which can only lengthen the what-if path.
    The chains reported are the parts the captured edges form once the stream-order-only
    edges are removed.
"""

from __future__ import annotations

import heapq
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from ..graphs.model import UNATTRIBUTED, Bundle, CapturedGraph, Node

LATENCY_NODE_NS = 5_000  # a "tiny" node: median work node shorter than this
LATENCY_IDLE_PCT = 20.0  # gaps this large a share of the span make a graph latency bound
LATENCY_MIN_NODES = 10
SERIAL_PARALLELISM = 1.05  # achieved parallelism below this: one node at a time
SERIAL_DAG_PARALLELISM = 1.1  # ... while the DAG would allow at least this
TOP = 10  # near-critical nodes and chains listed
MAX_LISTED_EDGES = 50  # stream-order-only edges listed (all are counted)
REACH_BUDGET = 5_000_000  # node visits for the reachability checks of one graph
_EPS = 1e-6


def _median(xs: Sequence[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


class _Dag:
    """A graph's nodes by position (index in ``graph.nodes``) and its edges between them."""

    def __init__(self, g: CapturedGraph):
        self.n = n = len(g.nodes)
        pos = {nd.local_id: i for i, nd in enumerate(g.nodes)}
        src: list[int] = []
        dst: list[int] = []
        self.dropped = 0  # edges naming no node of the graph, or a node itself
        for a, b in g.edges:
            i, j = pos.get(a), pos.get(b)
            if i is None or j is None or i == j:
                self.dropped += 1
                continue
            src.append(i)
            dst.append(j)
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        self.succ, self.pred = _adjacency(n, src, dst)
        self.order = _topo_order(n, src, dst, self.succ)


def _adjacency(n: int, src: Sequence[int], dst: Sequence[int]
               ) -> tuple[list[list[int]], list[list[int]]]:
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src, dst):
        succ[a].append(b)
        pred[b].append(a)
    return succ, pred


def _topo_order(n: int, src: Sequence[int], dst: Sequence[int], succ: list[list[int]]
                ) -> Optional[list[int]]:
    """Positions in a topological order, the lowest position first among the ready ones
    (capture order when the positions already are one); None on a cycle."""
    if all(a < b for a, b in zip(src, dst)):
        return list(range(n))
    indeg = [0] * n
    for b in dst:
        indeg[b] += 1
    ready = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, v)
    return order if len(order) == n else None


def _longest(order: list[int], succ: list[list[int]], pred: list[list[int]], d: list[float]
             ) -> tuple[float, list[int], list[float], list[float]]:
    """(length, path positions, earliest starts, slacks) of the longest path."""
    n = len(d)
    est = [0.0] * n
    for u in order:
        f = est[u] + d[u]
        for v in succ[u]:
            if f > est[v]:
                est[v] = f
    if not n:
        return 0.0, [], [], []
    eft = [e + x for e, x in zip(est, d)]
    length = max(eft)
    lst = [0.0] * n
    for u in reversed(order):
        lf = length
        for v in succ[u]:
            if lst[v] < lf:
                lf = lst[v]
        lst[u] = lf - d[u]
    slack = [max(0.0, a - b) for a, b in zip(lst, est)]
    # the path: from the last-finishing node (the first such in topological order) back
    rank = {u: i for i, u in enumerate(order)} if order != list(range(n)) else None
    ends = [u for u in range(n) if eft[u] >= length - _EPS]
    v = min(ends, key=lambda u: rank[u]) if rank else ends[0]
    path = [v]
    while True:
        cands = [u for u in pred[v] if abs(eft[u] - est[v]) <= _EPS]
        if not cands:
            break
        v = max(cands, key=lambda u: (d[u] > 0, -(rank[u] if rank else u)))
        path.append(v)
    path.reverse()
    return length, path, est, slack


def _node_durations(bundle: Bundle) -> dict[int, float]:
    """exec node id -> median duration over the timed replays, for work nodes."""
    if not bundle.replays or not bundle.work:
        return {}
    med = np.median(bundle.durations, axis=1)
    return {n.exec_node_id: float(m) for n, m in zip(bundle.work, med.tolist())
            if n.durations_ns}


def _events_by_graph(bundle: Bundle) -> dict[str, dict[int, list[Mapping[str, Any]]]]:
    out: dict[str, dict[int, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for e in bundle.events:
        out[str(e.get("graph"))][int(e["replay"])].append(e)
    return out


def _launches(bundle: Bundle) -> dict[tuple[str, int], tuple[int, int]]:
    return {(str(x["graph"]), int(x["replay"])): (int(x["start_ns"]), int(x["end_ns"]))
            for x in getattr(bundle, "launches", ())}


# ---------------------------------------------------------------- per replay, from events

def _replay_metrics(dag: _Dag, pos: np.ndarray, start: np.ndarray, end: np.ndarray,
                    launch: Optional[tuple[int, int]]) -> dict[str, Any]:
    t0, t1 = int(start.min()), int(end.max())
    span = t1 - t0
    o = np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    reach = np.maximum.accumulate(e)
    idle = int(np.clip(s[1:] - reach[:-1], 0, None).sum()) if len(s) > 1 else 0
    # concurrency: +1 at starts, -1 at ends (ends first where they meet a start)
    t = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    k = np.lexsort((delta, t))
    t, delta = t[k], delta[k]
    running = np.cumsum(delta)
    concurrent = int(np.diff(t)[running[:-1] >= 2].sum()) if len(t) > 1 else 0
    # dependency-resolution gaps: a node's start - its last timed predecessor's end
    n = dag.n
    st = np.full(n, np.nan)
    en = np.full(n, np.nan)
    st[pos] = start
    en[pos] = end
    dep = 0
    if len(dag.src):
        pe = en[dag.src]
        ok = ~np.isnan(pe)
        last = np.full(n, -np.inf)
        np.maximum.at(last, dag.dst[ok], pe[ok])
        g = st - last
        g = g[np.isfinite(g)]
        dep = int(np.clip(g, 0, None).sum())
    out: dict[str, Any] = {"span_ns": span, "first_ns": t0, "last_ns": t1, "idle_ns": idle,
                           "busy_ns": span - idle, "dep_gap_ns": dep,
                           "concurrent_ns": concurrent, "launch_ns": None,
                           "launch_call_ns": None, "tail_ns": None}
    if launch is not None:
        out["launch_ns"] = t0 - launch[0]
        out["launch_call_ns"] = launch[1] - launch[0]
    return out


# ---------------------------------------------------------------- false serialization

def _ranges(n: Node, key: str) -> Optional[list[tuple[int, int]]]:
    v = getattr(n, key, None)
    if v is None:
        return None
    return [(int(a), int(b)) for a, b in v if b > a]


def _data_edges(g: CapturedGraph, order: list[int]) -> tuple[list[tuple[int, int]], list[bool]]:
    """The data DAG's edges (positions) and which nodes have no op information (module
    docstring: per-segment last writer and readers since; nodes without op info are
    barriers)."""
    n = len(g.nodes)
    hard = [False] * n
    per: list[tuple[list[tuple[int, int]], list[tuple[int, int]]]] = [([], [])] * n
    starts: list[int] = []
    ends: list[int] = []
    for i, nd in enumerate(g.nodes):
        r, w = _ranges(nd, "reads"), _ranges(nd, "writes")
        if r is None and w is None:
            hard[i] = True
            continue
        per[i] = (r or [], w or [])
        for a, b in per[i][0] + per[i][1]:
            starts.append(a)
            ends.append(b)
    bounds = np.unique(np.asarray(starts + ends, dtype=np.uint64))
    seg_of = {int(x): k for k, x in enumerate(bounds.tolist())}
    last_writer = [-1] * len(bounds)
    readers: list[Optional[list[int]]] = [None] * len(bounds)
    edges: list[tuple[int, int]] = []
    barrier = -1
    since: list[int] = []
    for u in order:
        deps: set[int] = set()
        if hard[u]:
            deps.update(since)
            if barrier >= 0:
                deps.add(barrier)
            barrier, since = u, []
        else:
            if barrier >= 0:
                deps.add(barrier)
            rs, ws = per[u]
            for a, b in rs:
                for s in range(seg_of[a], seg_of[b]):
                    w = last_writer[s]
                    if w >= 0:
                        deps.add(w)
                    lst = readers[s]
                    if lst is None:
                        readers[s] = [u]
                    else:
                        lst.append(u)
            for a, b in ws:
                for s in range(seg_of[a], seg_of[b]):
                    w = last_writer[s]
                    if w >= 0:
                        deps.add(w)
                    lst = readers[s]
                    if lst:
                        deps.update(lst)
                    readers[s] = None
                    last_writer[s] = u
            deps.discard(u)
            since.append(u)
        edges.extend((x, u) for x in deps)
    return edges, hard


def _serialization(g: CapturedGraph, dag: _Dag, d: list[float],
                   stream: list[Optional[int]], dag_cp: float, work: float) -> dict[str, Any]:
    n = dag.n
    assert dag.order is not None
    if all(getattr(nd, "reads", None) is None and getattr(nd, "writes", None) is None
           for nd in g.nodes):
        return {"op_info": False, "nodes_without_op_info": n,
                "note": "no memory ranges recorded (bundle from before reads/writes): "
                        "every edge kept"}
    data, hard = _data_edges(g, dag.order)
    kept = set()
    cands = []
    for a, b in zip(dag.src.tolist(), dag.dst.tolist()):
        sa, sb = stream[a], stream[b]
        if hard[a] or hard[b] or (sa is not None and sb is not None and sa != sb):
            kept.add((a, b))
        else:
            cands.append((a, b))
    w_edges = set(data) | kept
    wsucc: list[list[int]] = [[] for _ in range(n)]
    wpred: list[list[int]] = [[] for _ in range(n)]
    for a, b in w_edges:
        wsucc[a].append(b)
        wpred[b].append(a)
    rank = [0] * n
    for i, u in enumerate(dag.order):
        rank[u] = i
    false_edges: list[tuple[int, int]] = []
    budget = REACH_BUDGET
    unchecked = 0
    for a, b in cands:
        if (a, b) in w_edges:
            continue
        if budget <= 0:
            unchecked += 1
            continue
        found, budget = _reaches(wsucc, rank, a, b, budget)
        if not found and budget > 0:
            false_edges.append((a, b))
        elif not found:
            unchecked += 1
    length, path, _, _ = _longest(dag.order, wsucc, wpred, d)
    out: dict[str, Any] = {
        "op_info": True,
        "nodes_without_op_info": sum(hard),
        "data_edges": len(data),
        "stream_order_only_edges": len(false_edges),
        "edges": [[g.nodes[a].local_id, g.nodes[b].local_id]
                  for a, b in false_edges[:MAX_LISTED_EDGES]],
        "what_if_ns": length,
        "what_if_path": [g.nodes[i].local_id for i in path],
        "gain_ns": dag_cp - length,
        "gain_pct": 100.0 * (dag_cp - length) / dag_cp if dag_cp else 0.0,
        "what_if_parallelism": work / length if length else None,
        "chains": _chains(g, dag, d, set(false_edges)) if false_edges else [],
    }
    if unchecked:
        out["unchecked_edges"] = unchecked
    return out


def _reaches(succ: list[list[int]], rank: list[int], a: int, b: int, budget: int
             ) -> tuple[bool, int]:
    """Whether b is reachable from a (visiting only nodes ranked before b)."""
    limit = rank[b]
    stack = [a]
    seen = {a}
    while stack:
        u = stack.pop()
        budget -= 1
        if budget <= 0:
            return False, 0
        for v in succ[u]:
            if v == b:
                return True, budget
            if v not in seen and rank[v] < limit:
                seen.add(v)
                stack.append(v)
    return False, budget


def _chains(g: CapturedGraph, dag: _Dag, d: list[float], cut: set[tuple[int, int]]
            ) -> list[dict[str, Any]]:
    """The parts the captured edges form without the stream-order-only ones (largest work
    first)."""
    parent = list(range(dag.n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(dag.src.tolist(), dag.dst.tolist()):
        if (a, b) not in cut:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = defaultdict(list)
    assert dag.order is not None
    for u in dag.order:
        groups[find(u)].append(u)
    rows = []
    for members in groups.values():
        mods = Counter(g.nodes[i].module for i in members if g.nodes[i].is_work)
        rows.append({"first": g.nodes[members[0]].local_id,
                     "last": g.nodes[members[-1]].local_id, "nodes": len(members),
                     "work_ns": float(sum(d[i] for i in members)),
                     "module": mods.most_common(1)[0][0] if mods else UNATTRIBUTED})
    rows.sort(key=lambda r: (-r["work_ns"], r["first"]))
    return rows[:TOP]


# ---------------------------------------------------------------- one graph

def diagnose_graph(bundle: Bundle, g: CapturedGraph,
                   durations: Optional[Mapping[int, float]] = None,
                   events: Optional[Mapping[int, list[Mapping[str, Any]]]] = None,
                   launches: Optional[Mapping[tuple[str, int], tuple[int, int]]] = None
                   ) -> dict[str, Any]:
    """The diagnosis of one graph of ``bundle`` as plain data (module docstring)."""
    if durations is None:
        durations = _node_durations(bundle)
    if events is None:
        events = _events_by_graph(bundle).get(g.name, {})
    if launches is None:
        launches = _launches(bundle)
    dag = _Dag(g)
    n = dag.n
    out: dict[str, Any] = {"graph": g.name, "nodes": n, "edges": len(dag.src),
                           "work_nodes": sum(1 for x in g.nodes if x.is_work),
                           "assumptions": [], "verdicts": []}
    if dag.dropped:
        out["assumptions"].append(f"{dag.dropped} edge(s) naming no node of the graph (or a "
                                  "node itself) left out")
    if dag.order is None:
        out["error"] = "the edges form a cycle: no critical path"
        return out
    pos_of = {nd.exec_node_id: i for i, nd in enumerate(g.nodes)}
    # per-replay event columns (positions, starts, ends) and per-node event durations/streams
    cols: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    ev_dur: dict[int, list[int]] = defaultdict(list)
    stream: list[Optional[int]] = [None] * n
    for r, evs in sorted(events.items()):
        p, s, e = [], [], []
        for ev in evs:
            i = pos_of.get(int(ev["exec_node_id"]))
            if i is None:
                continue
            a, dur = int(ev["start_ns"]), int(ev["dur_ns"])
            p.append(i)
            s.append(a)
            e.append(a + dur)
            ev_dur[i].append(dur)
            if stream[i] is None and ev.get("stream") is not None:
                stream[i] = int(ev["stream"])
        if p:
            cols[r] = (np.asarray(p, np.int64), np.asarray(s, np.int64), np.asarray(e, np.int64))
    timed = bool(durations) or bool(cols)
    d = [0.0] * n
    untimed: Counter[str] = Counter()
    for i, nd in enumerate(g.nodes):
        x = durations.get(nd.exec_node_id)
        if x is None and ev_dur.get(i):
            x = float(statistics.median(ev_dur[i]))
        if x is None:
            untimed["work" if nd.is_work else nd.type] += 1
            x = 0.0 if timed else (1.0 if nd.is_work else 0.0)
        d[i] = x
    if not timed:
        out["assumptions"].append("no timed replays: each work node counted as 1 (lengths "
                                  "are node counts)")
    elif untimed:
        what = ", ".join(f"{k} {v}" for k, v in sorted(untimed.items()))
        out["assumptions"].append(f"nodes without timing taken as 0 ns ({what})")
    out["timed"] = timed
    length, path, est, slack = _longest(dag.order, dag.succ, dag.pred, d)
    work = float(sum(d))
    on = set(path)
    mods: dict[str, float] = defaultdict(float)
    for i in path:
        mods[g.nodes[i].module] += d[i]
    zero_off = sum(1 for i in range(n) if i not in on and slack[i] <= _EPS)
    near = sorted((i for i in range(n) if i not in on and g.nodes[i].is_work),
                  key=lambda i: (slack[i], i))[:TOP]
    out["critical_path"] = {
        "length_ns": length, "nodes": [g.nodes[i].local_id for i in path],
        "exec_node_ids": [g.nodes[i].exec_node_id for i in path],
        "work_nodes": sum(1 for i in path if g.nodes[i].is_work),
        "modules": [{"module": m, "ns": t, "pct": 100.0 * t / length if length else 0.0}
                    for m, t in sorted(mods.items(), key=lambda kv: (-kv[1], kv[0]))],
    }
    out["slack"] = {
        "on_path": len(path), "zero_slack_off_path": zero_off,
        "off_path": n - len(path),
        "near_critical": [{"local_id": g.nodes[i].local_id, "slack_ns": slack[i],
                           "name": g.nodes[i].short_name, "module": g.nodes[i].module}
                          for i in near],
    }
    out["slack_ns"] = {g.nodes[i].local_id: slack[i] for i in range(n)}
    out["work_ns"] = work
    out["dag_parallelism"] = work / length if length else None
    out["streams"] = len({x for x in stream if x is not None})
    # where the span goes
    reps = []
    for r, (p, s, e) in sorted(cols.items()):
        m = _replay_metrics(dag, p, s, e, launches.get((g.name, r)))
        m["replay"] = r
        reps.append(m)
    out["replays"] = reps
    med = {k: _median([x[k] for x in reps if x[k] is not None])
           for k in ("span_ns", "idle_ns", "dep_gap_ns", "concurrent_ns", "launch_ns",
                     "launch_call_ns", "busy_ns")}
    out["median"] = med
    span = med["span_ns"]
    # a bundle of one graph has the span of every traced replay, not only of those with events
    whole = [float(x) for x in bundle.replay_span_ns if x] if len(bundle.graphs) == 1 else []
    out["span_ns"] = _median(whole) if whole else span
    out["span_replays"] = len(whole) if whole else len(reps)
    out["parallelism"] = work / out["span_ns"] if out["span_ns"] and timed else None
    out["idle_pct"] = 100.0 * med["idle_ns"] / span if span else None
    out["concurrency_pct"] = 100.0 * med["concurrent_ns"] / span if span else None
    out["launch_latency_ns"] = med["launch_ns"]
    out["launch_recorded"] = any(x["launch_ns"] is not None for x in reps)
    if timed:
        out["serialization"] = _serialization(g, dag, d, stream, length, work)
    out["verdicts"] = _verdicts(g, out, d)
    return out


def _verdicts(g: CapturedGraph, o: dict[str, Any], d: list[float]) -> list[str]:
    v: list[str] = []
    span = o.get("span_ns")
    if not span or not o.get("timed"):
        return v
    work_d = [x for x, nd in zip(d, g.nodes) if nd.is_work]
    med_node = _median(work_d) or 0.0
    launch = o["launch_latency_ns"]
    launch_share = 100.0 * launch / (launch + span) if launch and launch > 0 else 0.0
    if (len(work_d) >= LATENCY_MIN_NODES and med_node < LATENCY_NODE_NS
            and (o["idle_pct"] >= LATENCY_IDLE_PCT or launch_share >= LATENCY_IDLE_PCT)):
        v.append(f"launch/dependency-latency bound: {len(work_d)} work nodes of median "
                 f"{med_node / 1e3:.1f} µs; {o['idle_pct']:.0f}% of the span is idle"
                 + (f", launch takes {launch_share:.0f}% of launch + span" if launch_share
                    else ""))
    par = o.get("parallelism")
    ser = o.get("serialization") or {}
    dag_par = o.get("dag_parallelism") or 0.0
    wi_par = ser.get("what_if_parallelism") or 0.0
    if par is not None and par < SERIAL_PARALLELISM:
        if dag_par >= SERIAL_DAG_PARALLELISM:
            v.append(f"serialized on one stream: the DAG allows {dag_par:.2f}x parallelism, "
                     f"the replay achieved {par:.2f}x")
        elif wi_par >= SERIAL_DAG_PARALLELISM:
            v.append(f"serialized on one stream: {ser['stream_order_only_edges']} "
                     f"stream-order-only edge(s); independent chains on more streams could "
                     f"take the critical path from {o['critical_path']['length_ns'] / 1e3:.1f}"
                     f" to {ser['what_if_ns'] / 1e3:.1f} µs (-{ser['gain_pct']:.0f}%)")
    return v


# ---------------------------------------------------------------- the bundle

def _between(bundle: Bundle, per_graph: list[dict[str, Any]],
             launches: Mapping[tuple[str, int], tuple[int, int]]) -> Optional[dict[str, Any]]:
    """Gaps between consecutive replays on the GPU (module docstring: which pairs count);
    fills each replay's ``tail_ns``."""
    iv = []  # (first, last, graph, replay, metrics)
    for o in per_graph:
        for m in o.get("replays", []):
            iv.append((m["first_ns"], m["last_ns"], o["graph"], m["replay"], m))
    if len(iv) < 2:
        return None
    iv.sort(key=lambda x: (x[0], x[1]))
    kept: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for a, b, gname, _, _ in iv:
        kept[gname].append((a, b))
    skip = bundle.manifest.get("skip_replays") or 0
    more = {}
    for g in bundle.graphs:
        total = g.info.get("replays") if isinstance(g.info.get("replays"), int) else None
        more[g.name] = (total if total is not None else bundle.replays) > len(kept.get(g.name,
                                                                                 []))
    first = {k: v[0][0] for k, v in kept.items()}
    last = {k: v[-1][0] for k, v in kept.items()}
    gaps, host = [], []
    for x, y in zip(iv, iv[1:]):
        if any(more.get(k) and last[k] <= x[0] for k in kept):
            continue  # an unkept replay of k may run in between
        if skip and any(first[k] >= y[0] for k in kept):
            continue  # a skipped replay of k may run in between
        gap = y[0] - x[1]
        lau = launches.get((y[2], y[3]))
        x[4]["tail_ns"] = (lau[0] if lau else y[0]) - x[1]
        gaps.append(gap)
        if lau:
            host.append(max(0, lau[0] - x[1]))
    if not gaps:
        return None
    spans = [m["span_ns"] for o in per_graph for m in o.get("replays", [])]
    out = {"pairs": len(gaps), "median_gap_ns": _median(gaps), "max_gap_ns": max(gaps),
           "total_gap_ns": sum(gaps), "median_span_ns": _median(spans),
           "host_wait_median_ns": _median(host)}
    med_gap, med_span = out["median_gap_ns"], out["median_span_ns"]
    if med_gap is not None and med_span is not None and med_gap > med_span:
        out["verdict"] = (f"host bound between replays: the GPU runs no graph for "
                          f"{med_gap / 1e3:.1f} µs between replays (median) against "
                          f"{med_span / 1e3:.1f} µs of replay span")
    return out


def diagnose(bundle: Bundle) -> dict[str, Any]:
    """The diagnosis of every graph of ``bundle`` and of the gaps between its replays."""
    durations = _node_durations(bundle)
    events = _events_by_graph(bundle)
    launches = _launches(bundle)
    graphs = [diagnose_graph(bundle, g, durations, events.get(g.name, {}), launches)
              for g in bundle.graphs]
    between = _between(bundle, graphs, launches)
    for o in graphs:
        tails = [m["tail_ns"] for m in o.get("replays", []) if m["tail_ns"] is not None]
        o.setdefault("median", {})["tail_ns"] = _median(tails)
    verdicts = [v for o in graphs for v in o["verdicts"]]
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

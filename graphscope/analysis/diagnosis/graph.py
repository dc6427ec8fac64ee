"""One graph's diagnosis: the replays its figures use and what they measured (``measure``),
then its critical path, slack, stream order, what-if and verdicts (``analyse``); the
definitions are the package's docstring."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress
from typing import Any, Optional

import numpy as np

from ...model.bundle import Bundle
from ...model.graph import CapturedGraph
from ..dag import EPS, Dag, longest
from ..findings import Basis
from ..occupancy import Device
from ..replays import event_columns, node_gaps, replay_metrics
from ..stats import module_at
from ..stream_order import stream_order
from ..whatif import DEFAULT_STREAMS, Measured, predict
from .types import (
    Assumption,
    CriticalPath,
    GraphDiagnosis,
    Medians,
    ModuleShare,
    NearNode,
    ReplayFigures,
    ReplaySelection,
    Slack,
)
from .verdicts import measured_streams, verdicts

TOP = 10  # near-critical nodes listed
COLD_RATIO = 1.05  # a first replay this much longer than the others' median is a cold one
MEDIAN_KEYS = ("span_ns", "idle_ns", "dep_gap_ns", "concurrent_ns", "launch_ns",
               "launch_call_ns", "launch_queued_ns", "busy_ns", "gap_after_ns")


@dataclass
class GraphWork:
    """One graph's measurements before the analysis (mutable: the gaps between replays fill
    each replay's gap after it)."""

    g: CapturedGraph
    dag: Dag
    selection: ReplaySelection
    cols: tuple[np.ndarray, ...]  # (replay, position, start, end) of the replays used
    stream: np.ndarray
    d: np.ndarray  # per node: its duration (ns; node counts where untimed)
    timed: bool
    untimed: Counter[str]
    reps: list[dict[str, Any]]  # per used replay with events: replay_metrics + "replay"
    spans: list[float]  # per used replay: its span
    assumptions: list[Assumption] = field(default_factory=list)


def measure(bundle: Bundle, g: CapturedGraph, dag: Dag, events: Sequence[Mapping[str, Any]],
            launches: Mapping[tuple[str, int], tuple[int, int]],
            busy: Mapping[tuple[str, int], int],
            columns: Optional[tuple[np.ndarray, ...]] = None) -> GraphWork:
    """The replays a graph's figures use and what they measured (package docstring)."""
    rp, pos, st, en, sm = columns if columns is not None else event_columns(events,
                                                                              dag.exec_ids)
    stream = np.full(dag.n, -1, np.int64)
    o = np.argsort(rp, kind="stable")[::-1]  # the first replay's stream wins
    stream[pos[o]] = sm[o]
    sel, spans = selection(bundle, g, rp, st, en)
    used = np.zeros(max([*sel.used, int(rp.max()) if len(rp) else 0]) + 1, bool)
    used[list(sel.used)] = True
    keep = used[rp] if len(rp) else np.zeros(0, bool)
    cols = (rp[keep], pos[keep], st[keep], en[keep])
    d, timed, untimed = _durations(dag, sel, cols)
    reps = []
    for r in sorted(set(cols[0].tolist())):
        k = cols[0] == r
        m = replay_metrics(dag, cols[1][k], cols[2][k], cols[3][k], launches.get((g.name, r)),
                           busy.get((g.name, r)))
        m["replay"] = r
        reps.append(m)
    used_spans = [spans[r] for r in counted(sel) if spans.get(r)]
    w = GraphWork(g, dag, sel, cols, stream, d, timed, untimed, reps, used_spans)
    if dag.dropped:
        w.assumptions.append(Assumption("edges_dropped", dag.dropped))
    if not timed:
        w.assumptions.append(Assumption("node_counts", why="not_replayed_traced"
                                        if bundle.replays else "no_timed_replays"))
    elif untimed:
        w.assumptions.append(Assumption("untimed_as_zero", sum(untimed.values()),
                                        tuple(sorted(untimed.items()))))
    return w


def selection(bundle: Bundle, g: CapturedGraph, rp: np.ndarray, st: np.ndarray,
              en: np.ndarray) -> tuple[ReplaySelection, dict[int, float]]:
    """A graph's replay selection (``select``) and its known span per replay, from its events'
    (replay, start, end) columns and, for a bundle of one graph, the bundle's spans."""
    ev_spans = replay_spans(rp, st, en)
    spans: dict[int, float] = dict(ev_spans)
    if len(bundle.graphs) == 1:  # one graph: the bundle's spans are its own, every replay
        for r, x in enumerate(bundle.replay_span_ns):
            spans.setdefault(r, float(x))
    traced = max((len(n.durations_ns) for n in g.nodes), default=0) or (
        bundle.replays if len(bundle.graphs) == 1 else 0)
    rows = [n.durations_ns for n in g.nodes if n.is_work and n.durations_ns]
    return select(traced, sorted(ev_spans), spans, lambda: _sums(rows)), spans


def set_aside(bundle: Bundle, g: CapturedGraph) -> tuple[int, ...]:
    """The replays of ``g`` its figures leave out (a cold first one), as the diagnosis
    decides: the summary's tables count the same replays."""
    evs = bundle.events_by_graph.get(g.name, ())
    rp = np.fromiter((e["replay"] for e in evs), np.int64, len(evs))
    st = np.fromiter((e["start_ns"] for e in evs), np.int64, len(evs))
    en = st + np.fromiter((e["dur_ns"] for e in evs), np.int64, len(evs))
    return selection(bundle, g, rp, st, en)[0].set_aside


def _durations(dag: Dag, sel: ReplaySelection, cols: tuple[np.ndarray, ...]
               ) -> tuple[np.ndarray, bool, Counter[str]]:
    """Per node: its median duration over the replays used (its events' where it has no
    durations; 0, or 1 where the graph has no timing at all), whether the graph is timed, and
    the kinds of the nodes without timing."""
    d = durations(dag, counted(sel))
    rp, pos, st, en = cols
    missing = np.isnan(d)
    if missing.any() and len(pos):
        need = missing[pos]
        by: dict[int, list[int]] = {}
        for i, x in zip(pos[need].tolist(), (en - st)[need].tolist()):
            by.setdefault(i, []).append(x)
        for i, v in by.items():
            d[i] = float(statistics.median(v))
        missing = np.isnan(d)
    timed = bool((~missing).any() or len(rp))
    untimed: Counter[str] = Counter()
    if missing.any():
        idx = np.flatnonzero(missing)
        untimed.update("work" if dag.is_work[i] else dag.types[i] for i in idx.tolist())
        d[idx] = 0.0 if timed else np.where(dag.is_work[idx], 1.0, 0.0)
    return d, timed, untimed


def analyse(bundle: Bundle, w: GraphWork, device: Device, per_node: bool = False
            ) -> tuple[GraphDiagnosis, Optional[Basis]]:
    """The diagnosis of a measured graph, and what its findings need (None: untimed, or a
    cycle)."""
    dag, g, timed = w.dag, w.g, w.timed
    med = _medians(w.reps)
    span = float(statistics.median(w.spans)) if w.spans else med.span_ns
    idle, conc = med.idle_ns or 0.0, med.concurrent_ns or 0.0
    rs = med.span_ns
    base: dict[str, Any] = dict(
        graph=g.name, nodes=dag.n, edges=len(dag.src), work_nodes=int(dag.is_work.sum()),
        timed=timed, assumptions=tuple(w.assumptions), selection=w.selection,
        streams=len(set(w.stream.tolist()) - {-1}), replays=tuple(_figures(m) for m in w.reps),
        median=med, span_ns=span if timed else None, span_replays=len(w.spans),
        idle_pct=100.0 * idle / rs if rs else None,
        concurrency_pct=100.0 * conc / rs if rs else None,
        launch_latency_ns=med.launch_ns,
        launch_recorded=any(m["launch_ns"] is not None for m in w.reps),
        what_if_measured=None)
    if dag.order is None:  # a cycle: no critical path; the replays' figures stand
        return GraphDiagnosis(
            **base, error="cycle", critical_path=None, slack=None, slack_ns=None,
            work_ns=work_per_replay(w) if timed else None, dag_parallelism=None,
            parallelism=None, stream_order=None, what_if=None, verdicts=()), None
    d = w.d.tolist()
    length, path, slack = longest(dag.order, dag.succ, dag.pred, d, dag.src, dag.dst,
                                  rank=dag.rank)
    work = work_per_replay(w)
    cp = _critical_path(dag, path, d, length, timed)
    so = wi = basis = None
    if timed:
        so, wi, basis = _stream_order_and_what_if(w, device, span, length, path)
    measured = measured_streams(g.info, wi, span)
    out = GraphDiagnosis(
        **{**base, "what_if_measured": measured}, error=None, critical_path=cp,
        slack=_slack(dag, path, slack),
        slack_ns=dict(zip(dag.lids.tolist(), slack.tolist())) if per_node else None,
        # the DAG's parallelism: its nodes' medians summed over the path of the same medians
        work_ns=work if timed else None,
        dag_parallelism=float(w.d.sum()) / length if length else None,
        parallelism=work / span if span and timed else None, stream_order=so, what_if=wi,
        verdicts=())
    out = _with_verdicts(out, w, path)
    if basis is not None:
        basis.measured_gain_ns = (None if measured is None or not measured.gain_pct
                                  or measured.span_ns is None or measured.one_stream_ns is None
                                  else measured.one_stream_ns - measured.span_ns)
        if basis.measured_gain_ns is not None and measured is not None and (
                measured.one_stream_iqr_ns and measured.span_iqr_ns):
            # the spread of the measured gain: the spans' quartiles against each other
            (o1, o3), (a1, a3) = measured.one_stream_iqr_ns, measured.span_iqr_ns
            gain = basis.measured_gain_ns
            basis.measured_range_ns = (min(gain, o1 - a3), max(gain, o3 - a1))
    return out, basis


def work_per_replay(w: GraphWork) -> float:
    """The graph's GPU work: its work nodes' durations summed in each counted replay, the
    median (the Graphs table's time per replay); the nodes' medians summed where the
    durations do not cover the counted replays (a graph timed by its events only)."""
    sums = kernel_sums(w.dag)
    xs = [sums[r] for r in counted(w.selection) if r < len(sums) and sums[r] > 0]
    return float(statistics.median(xs)) if xs else float(w.d.sum())


def _with_verdicts(o: GraphDiagnosis, w: GraphWork, path: list[int]) -> GraphDiagnosis:
    from dataclasses import replace

    at = np.asarray(path, np.int64)
    path_d = w.d[at[w.dag.is_work[at]]] if len(at) else w.d[:0]
    return replace(o, verdicts=verdicts(o, w.d[w.dag.is_work], path_d))


def _medians(reps: list[dict[str, Any]]) -> Medians:
    vals = {k: [x[k] for x in reps if x.get(k) is not None] for k in MEDIAN_KEYS}
    return Medians(**{k: float(statistics.median(v)) if v else None for k, v in vals.items()})


def _figures(m: Mapping[str, Any]) -> ReplayFigures:
    vals: dict[str, Any] = {f: m.get(f) for f in ReplayFigures.__dataclass_fields__}
    return ReplayFigures(**vals)


def _critical_path(dag: Dag, path: list[int], d: list[float], length: float, timed: bool
                   ) -> CriticalPath:
    mods = module_sums(dag, path, d)

    def share(m: str, t: float) -> ModuleShare:
        return ModuleShare(m, t if timed else None, None if timed else t,
                           100.0 * t / length if length else 0.0)

    return CriticalPath(
        length_ns=length if timed else None,
        length_nodes=None if timed else int(round(length)),
        nodes=tuple(dag.lids[path].tolist()), exec_node_ids=tuple(dag.exec_ids[path].tolist()),
        work_nodes=int(dag.is_work[path].sum()) if path else 0,
        modules=tuple(share(m, t) for m, t in sorted(mods.items(),
                                                      key=lambda kv: (-kv[1], kv[0]))),
        modules_rolled_up=tuple(share(m, t) for m, t in rolled_up(mods, length)))


def _slack(dag: Dag, path: list[int], slack: np.ndarray) -> Slack:
    n = dag.n
    on = np.zeros(n, bool)
    on[path] = True
    off = np.flatnonzero(~on & dag.is_work)
    near = off[np.lexsort((off, slack[off]))][:TOP].tolist()
    nodes = dag.nodes
    return Slack(
        on_path=len(path), zero_slack_off_path=int(((slack <= EPS) & ~on).sum()),
        off_path=n - len(path),
        near_critical=tuple(NearNode(nodes[i].local_id, float(slack[i]), nodes[i].short_name,
                                     nodes[i].module) for i in near))


def _stream_order_and_what_if(w: GraphWork, device: Device, span: Optional[float],
                              length: float, path: list[int]) -> tuple[Any, Any, Basis]:
    """The stream order with each node's measured dependency latency in its weight (chains
    moved to other streams still pay it), the what-if where edges are stream order only, and
    the findings' basis."""
    dag = w.dag
    assert dag.order is not None
    lat = node_gaps(dag, *w.cols)
    d_lat = (w.d + lat).tolist()
    lat_len, lat_path = length, path
    if lat.any():
        lat_len, lat_path, _ = longest(dag.order, dag.succ, dag.pred, d_lat, dag.src, dag.dst,
                                       slack=False, rank=dag.rank)
    so, wdag = stream_order(dag, d_lat, w.stream, lat_len, float(lat.sum()))
    wi = schedule = None
    if wdag is not None and so.stream_order_only_edges and span:
        m = Measured(w.d, lat, w.stream, w.cols, span, _spread_pct(w.spans))
        tried = (w.g.info or {}).get("what_if_streams")
        n = tried.get("max_streams") if isinstance(tried, Mapping) else None
        # as many streams as a --try-streams measurement had, to compare like with like
        wi, schedule = predict(dag, m, wdag.src, wdag.dst, wdag.cut_dst, device,
                               max_streams=n if isinstance(n, int) and 2 <= n <= 64
                               else DEFAULT_STREAMS, as_captured_ns=lat_len)
    basis = Basis(
        graph=w.g.name, span_ns=span or 0.0,
        noise_ns=(span or 0.0) * _spread_pct(w.spans) / 100.0,
        path=np.asarray(lat_path, np.int64), duration_ns=w.d, latency_ns=lat, lids=dag.lids,
        module_codes=dag.module_codes, types=dag.types, nodes=dag.nodes, whatif=wi,
        schedule=schedule,
        cut_edges=so.edges, cut_count=so.stream_order_only_edges,
        chain_modules=tuple(c.module for c in so.chains))
    return so, wi, basis


def _spread_pct(spans: list[float]) -> float:
    """Half the IQR of the spans (half their range below four), in % of their median."""
    if len(spans) < 2:
        return 0.0
    med = statistics.median(spans)
    if len(spans) < 4:
        return 50.0 * (max(spans) - min(spans)) / med if med else 0.0
    q = statistics.quantiles(spans, n=4)
    return 50.0 * (q[2] - q[0]) / med if med else 0.0


# ---------------------------------------------------------------- the replays used

def replay_spans(rp: np.ndarray, st: np.ndarray, en: np.ndarray) -> dict[int, float]:
    """Per replay with events: first node start -> last node end."""
    if not len(rp):
        return {}
    o = np.argsort(rp, kind="stable")
    r = rp[o]
    cut = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
    lo = np.minimum.reduceat(st[o], cut)
    hi = np.maximum.reduceat(en[o], cut)
    return dict(zip(r[cut].tolist(), (hi - lo).astype(float).tolist()))


def select(traced: int, with_events: Sequence[int], spans: Mapping[int, float],
           kernel_sums: Optional[Callable[[], Sequence[float]]] = None) -> ReplaySelection:
    """The replays a graph's figures use: those with events (else every traced one), without
    a cold first replay: replay 0 whose span (where spans are known for it and another
    replay; else its summed node durations) is over COLD_RATIO times the median of the
    others'. Where replay 0 is the only one with events it stays (``only_cold``).
    ``kernel_sums``: gives the per-replay sums where the spans do not do."""
    cands = sorted(with_events) if with_events else list(range(traced))
    by = {r: s for r, s in spans.items() if s and s > 0}
    if 0 not in by or len(by) < 2:
        by = ({r: float(x) for r, x in enumerate(kernel_sums()) if x > 0}
              if kernel_sums is not None else {})
    cold = False
    first = others = None
    if 0 in cands and 0 in by and len(by) >= 2:
        first = by[0]
        others = float(statistics.median([v for r, v in by.items() if r != 0]))
        cold = first > COLD_RATIO * others
    used = [r for r in cands if not (cold and r == 0)]
    only_cold = cold and not used
    if only_cold:
        used = cands
    return ReplaySelection(
        used=tuple(used), set_aside=(0,) if cold and not only_cold else (),
        set_aside_span_ns=first if cold else None, others_span_ns=others if cold else None,
        traced=traced, with_events=len(with_events), only_cold=only_cold)


def counted(sel: ReplaySelection) -> list[int]:
    """The replays a graph's span, GPU work and critical path come from: every traced replay
    but a set-aside cold first one (the events' replays where none was traced by durations;
    the replays with events give the figures that need events: idle, gaps, launch). The gate
    compares the same replays (analysis/gate/samples.py)."""
    if sel.only_cold:
        return list(sel.used)
    every = [r for r in range(sel.traced) if r not in sel.set_aside]
    return every or list(sel.used)


def durations(dag: Dag, used: Sequence[int]) -> np.ndarray:
    """Per node: its median duration over the ``used`` replays (of its ``durations_ns``);
    NaN where it has none (not a work node, or not timed in those replays)."""
    n = dag.n
    out = np.full(n, np.nan)
    rows = dag.durations_ns
    lens = np.fromiter(map(len, rows), np.int64, n)
    lens[~dag.is_work] = 0
    work = np.flatnonzero(lens)
    if not len(work) or not used:
        return out
    lens = lens[work]
    r = int(lens.max())
    cols = np.asarray([x for x in used if x < r], np.int64)
    if not len(cols):
        return out
    if bool((lens == r).all()):  # usual: every work node timed in every replay
        mask = np.zeros(n, bool)
        mask[work] = True
        mat = np.fromiter(chain.from_iterable(compress(rows, mask.tolist())), np.float64,
                          len(work) * r).reshape(-1, r)
        out[work] = np.median(mat[:, cols], axis=1)
        return out
    wrows = [rows[i] for i in work.tolist()]
    for i, row, k in zip(work.tolist(), wrows, lens.tolist()):
        xs = [row[c] for c in cols.tolist() if c < k]
        if xs:
            out[i] = float(statistics.median(xs))
    return out


def kernel_sums(dag: Dag) -> list[float]:
    """Per replay: the graph's work node durations summed."""
    return _sums([x for x, w in zip(dag.durations_ns, dag.is_work.tolist()) if w and x])


def _sums(rows: Sequence[Sequence[int]]) -> list[float]:
    """Per replay: ``rows`` (each work node's durations by replay) summed."""
    if not rows:
        return []
    r = max(map(len, rows))
    if all(len(x) == r for x in rows):
        mat = np.fromiter(chain.from_iterable(rows), np.float64, len(rows) * r)
        return mat.reshape(-1, r).sum(axis=0).tolist()
    out = np.zeros(r)
    for x in rows:
        out[:len(x)] += x
    return out.tolist()


# ---------------------------------------------------------------- the path's modules

def module_sums(dag: Dag, path: list[int], d: list[float]) -> dict[str, float]:
    """Module -> the summed durations of ``path``'s nodes of that module (each module's
    durations added in path order, as a loop over the path would)."""
    if not path:
        return {}
    names, codes = dag.module_codes
    idx = codes[path]
    sums = np.bincount(idx, weights=np.asarray(d)[path], minlength=len(names))
    on = np.bincount(idx, minlength=len(names)) > 0
    return dict(zip(compress(names, on.tolist()), sums[on].tolist()))


def rolled_up(mods: dict[str, float], length: float, top: int = 4,
              cover: float = 60.0) -> list[tuple[str, float]]:
    """The critical path's module shares at the deepest module level whose ``top`` largest
    cover ``cover`` % of the path: two branches of 32 layers read ``L.left 50%, L.right 50%``,
    not 1% per layer. Pseudo modules (``(loss)``) stay whole. Shares under half a percent
    are left out."""
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
    return [(m, t) for m, t in chosen if t >= 0.005 * length]

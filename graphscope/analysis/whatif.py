"""The contention-aware what-if: the span a graph would have with its independent chains on up
to N streams, predicted from the bundle alone, with an interval and the assumptions it made.

The DAG
    The captured DAG without its stream-order-only edges (``stream_order.py``: the data DAG of
    the ops' memory ranges with the caching allocator's reuse of blocks undone, in-place writes
    kept, plus the edges that must stay). The chains it leaves (runs of one stream between
    those edges) are placed on streams as ``capture --try-streams N`` places ops
    (capture/streams.py): a chain continues the stream whose last chain produced its first
    node's input, else takes an unused stream, else the stream whose last chain is oldest;
    one stream runs its nodes in capture order.

The resource model (a mean-field simulation)
    Each node keeps its measured solo duration and, before it, its measured dependency
    latency (its start - its last predecessor's end in the one-stream replays), plus kappa
    where it waits for a node the plan puts on another stream. A kernel fills
    a share of the device's block slots (``occupancy.py``: waves of its blocks over the SMs,
    at the occupancy its grid, block, shared memory and registers allow); memcpy nodes share
    the copy engines. The schedule is computed as a longest path; then, per node, the
    time-averaged share the *other* nodes running beside it hold; a node whose own share and
    the others' exceed the device runs ``f + others`` times longer (the device is shared), and
    any node that overlaps another pays the interference term: ``duration * (1 + beta * phi)
    + delta * phi`` and ``latency + lambda * phi``, where phi is the share of its time during
    which another node runs (kernels side by side share L2, DRAM and the block scheduler).
    The schedule is recomputed with the new durations; ITERATIONS rounds, damped, fewer where
    a round moves the span by less than CONVERGED.

The interference term
    Calibrated from the bundle's own concurrent nodes where it has some: nodes of one launch
    signature (kernel, grid, block, shared memory; memset/memcpy by bytes) that ran both mostly
    alone (phi < 0.25) and mostly beside others (phi > 0.75) give (solo, added) pairs; beta and
    delta are their least-squares line (not negative). Otherwise, and for lambda and kappa
    always, :data:`PRIOR`, measured on an H200 (one recording rarely has a node type's gap
    both alone and beside others: the nodes alone are a chain's first few).

The prediction and its interval
    The model is also run on the graph as captured (one stream: the critical path with its
    latencies; several: the same simulation with its own streams, its measured durations
    deflated by the calibrated term), and the prediction is the measured span scaled by
    what-if / as captured. The interval: the interference on the predicted critical path
    moved by the calibration's uncertainty, the contention at the best-case register count
    where registers are not recorded, and the measured spans' own spread (half their IQR).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .dag import EPS, Dag, csr, finish_times, sorted_unique
from .diagnosis.types import Calibration, WhatIf
from .occupancy import Device, Resources, resources

ITERATIONS = 3
CONVERGED = 0.001  # a round that moves the span less than this share ends the simulation
LOW_PHI, HIGH_PHI = 0.25, 0.75  # mostly alone / mostly beside others (calibration)
MIN_SAMPLES = 2  # per group and side, for a group to count



# The branches sample (two chains of 32 Linear+ReLU, 32 x 1024) recorded on one stream and on
# two (tests/data/branches_forward, branches_2s_forward; nvidia-h200, 2026-12-01), node by node:
# beside the other chain (phi ~0.85) a node took 0.58 us + 1.6% longer and its dependency gap
# 0.55 us longer (per unit of phi: 0.6 us + 2%, 0.6 us). The side-stream sample
# (tests/data/sidestream_step, nvidia-h200, 2026-11-30): a node waiting for another stream's
# started 1.31 us after it, against 0.29 us (median) after a node of its own stream.
PRIOR = Calibration("prior", 0.02, 600.0, 600.0, 1000.0, 0, 50.0)
CALIBRATED_UNCERTAINTY_PCT = 30.0


@dataclass(frozen=True)
class Schedule:
    """One run of the model: each node's start and end, and the critical path's figures."""

    span_ns: float
    solo_span_ns: float  # the first round: solo durations and latencies, nothing shared
    start: np.ndarray
    end: np.ndarray
    path: list[int]
    interference_on_path_ns: float  # what the interference term adds along the path
    contention_on_path_ns: float  # what sharing the SMs / copy engines adds along the path
    contention_best_on_path_ns: float  # the same at the best-case register count
    phi: np.ndarray


class Sweep:
    """Intervals [start, end) swept once in time order: per interval the share of it during
    which another interval runs (``phi``), and for any per-interval weight, its time-averaged
    sum over the *other* intervals running then (:meth:`others`): one sort for both."""

    def __init__(self, start: np.ndarray, end: np.ndarray) -> None:
        m = self.m = len(start)
        if not m:
            self.phi = np.zeros(0)
            return
        t = np.concatenate([start, end])
        one = np.r_[np.ones(m), -np.ones(m)]
        self.k = k = np.lexsort((one, t))  # ends first where an end meets a start
        ts, running = t[k], np.cumsum(one[k])
        self.seg = np.diff(ts)
        many = np.r_[0.0, np.cumsum((running[:-1] >= 2) * self.seg)]
        self.i0 = np.searchsorted(ts, start, side="left")
        self.i1 = np.searchsorted(ts, end, side="left")
        self.dur = np.maximum(end - start, EPS)
        self.phi = np.clip((many[self.i1] - many[self.i0]) / self.dur, 0.0, 1.0)

    def others(self, share: np.ndarray) -> np.ndarray:
        if not self.m:
            return np.zeros(0)
        load = np.cumsum(np.r_[share, -share][self.k])
        area = np.r_[0.0, np.cumsum(load[:-1] * self.seg)]
        return np.maximum((area[self.i1] - area[self.i0]) / self.dur - share, 0.0)


def overlap(start: np.ndarray, end: np.ndarray, share: Optional[np.ndarray] = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Per interval [start, end): the share of it during which another interval runs (phi),
    and the time-averaged sum of ``share`` over the *other* intervals running then."""
    sw = Sweep(start, end)
    return sw.phi, sw.others(np.zeros(sw.m) if share is None else share)


def _path(eft: np.ndarray, w: np.ndarray, src: np.ndarray, dst: np.ndarray) -> list[int]:
    """The critical path of a schedule: back from the last end through tight edges."""
    n = len(eft)
    if not n:
        return []
    est = eft - w
    crit = np.full(n, -1, np.int64)
    if len(src):
        m = np.abs(eft[src] - est[dst]) <= EPS
        u, v = src[m], dst[m]
        crit[v] = u  # any tight predecessor will do
    v = int(np.argmax(eft))
    out = [v]
    crit_l = crit.tolist()
    while crit_l[v] >= 0 and len(out) <= n:
        v = crit_l[v]
        out.append(v)
    out.reverse()
    return out


def simulate(order: Sequence[int], src: np.ndarray, dst: np.ndarray, solo: np.ndarray,
             lat: np.ndarray, res: Resources, cal: Calibration, path: bool = True
             ) -> Schedule:
    """The mean-field simulation (module docstring) of the DAG ``src`` -> ``dst`` (stream
    order included) from solo durations and latencies; ``path``: trace the critical path
    (else the path's figures are 0)."""
    n = len(solo)
    if len(src):  # one edge per pair: most nodes keep one predecessor (the fast path)
        key = sorted_unique(dst * max(n, 1) + src)
        src, dst = key % max(n, 1), key // max(n, 1)
    pred = csr(n, dst, src)
    has_pred = np.diff(np.asarray(pred[0])) > 0  # the latency term is per dependency
    share = res.sm_worst
    d, lt = solo.astype(float), lat.astype(float)
    contention = np.ones(n)
    phi, others = np.zeros(n), np.zeros(n)
    eft = np.zeros(n)
    solo_span = last = 0.0
    for it in range(ITERATIONS + 1):
        eft = np.asarray(finish_times(order, pred, (d + lt).tolist()))
        span = float(eft.max() - (eft - d).min()) if n else 0.0
        if it == 0:
            solo_span = span
        elif abs(span - last) <= CONVERGED * span:
            break  # another round moves nothing that matters
        last = span
        if it == ITERATIONS:
            break
        start = eft - d
        sweep = Sweep(start, eft)
        phi = sweep.phi
        if it == 0 and not phi.any():
            break  # nothing runs beside anything: the solo schedule is the answer
        res.ensure(phi > 0)  # a node that runs beside none is no other node's contention
        others = sweep.others(share)
        contention = np.maximum(1.0, share + others)
        if res.ce.any():
            contention *= np.maximum(1.0, res.ce + sweep.others(res.ce))
        new_d = solo * contention * (1.0 + cal.slowdown_per_overlap * phi) + cal.added_ns * phi
        new_l = lat + cal.latency_added_ns * phi * has_pred
        if it == 0 and path and float((new_d - d).sum() + (new_l - lt).sum()) <= (
                CONVERGED * span):
            # every node together moves less than CONVERGED of the span: no round changes
            # the schedule that matters; the path takes its nodes' new times (first order)
            return _finish(span, solo_span, eft, d, lt, new_d, new_l, solo, lat, src, dst, res,
                           contention, others, phi)
        d, lt = (new_d, new_l) if it == 0 else (0.5 * (d + new_d), 0.5 * (lt + new_l))
    if not path:
        return Schedule(span, solo_span, eft - d, eft, [], 0.0, 0.0, 0.0, phi)
    return _finish(span, solo_span, eft, d, lt, d, lt, solo, lat, src, dst, res, contention,
                   others, phi)


def _finish(span: float, solo_span: float, eft: np.ndarray, d: np.ndarray, lt: np.ndarray,
            new_d: np.ndarray, new_l: np.ndarray, solo: np.ndarray, lat: np.ndarray,
            src: np.ndarray, dst: np.ndarray, res: Resources, contention: np.ndarray,
            others: np.ndarray, phi: np.ndarray) -> Schedule:
    """The schedule with its critical path (of the last round, ``d``/``lt``) and that path's
    figures at the durations ``new_d``/``new_l`` (the same unless the simulation stopped
    before a round that moved nothing that matters: then the path's change is added)."""
    share = res.sm_worst
    on_l = _path(eft, d + lt, src, dst)
    on = np.asarray(on_l, np.int64)
    span += float((new_d[on] - d[on]).sum() + (new_l[on] - lt[on]).sum())
    base = solo[on] * contention[on]
    # the best register case, to first order: the path's nodes with the SMs shared at the
    # best-case shares (the same schedule)
    best = contention[on] / np.maximum(1.0, share[on] + others[on]) * np.maximum(
        1.0, res.sm_best[on] + others[on] * _ratio(res.sm_best, share)[on])
    return Schedule(
        span_ns=span, solo_span_ns=solo_span, start=eft - d, end=eft, path=on_l,
        interference_on_path_ns=float((new_d[on] - base).sum() + (new_l[on] - lat[on]).sum()),
        contention_on_path_ns=float((base - solo[on]).sum()),
        contention_best_on_path_ns=float((solo[on] * best - solo[on]).sum()), phi=phi)


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b per element (1 where b is 0): how much smaller the others' shares are at the
    best case, taken as the node's own ratio."""
    return np.divide(a, b, out=np.ones_like(a), where=b > 0)


def deflate(measured: np.ndarray, lat: np.ndarray, start: np.ndarray, end: np.ndarray,
            res: Resources, cal: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """Solo durations and latencies of nodes measured beside others (their measured interval
    ``start``/``end``; NaN where a node has none): the model's term taken back out."""
    ok = np.isfinite(start) & np.isfinite(end)
    phi, others = np.zeros(len(measured)), np.zeros(len(measured))
    if ok.any():
        p, o = overlap(start[ok], end[ok], res.sm_worst[ok])
        phi[ok], others[ok] = p, o
    factor = np.maximum(1.0, res.sm_worst + others) * (1.0 + cal.slowdown_per_overlap * phi)
    solo = np.maximum((measured - cal.added_ns * phi) / factor, 0.3 * measured)
    return solo, np.maximum(lat - cal.latency_added_ns * phi, 0.0)


def calibrate(signature: Sequence[object], rp: np.ndarray, pos: np.ndarray, st: np.ndarray,
              en: np.ndarray) -> Calibration:
    """The interference term from a bundle's concurrent nodes (module docstring), or
    :data:`PRIOR` where they do not say. ``signature``: per node position, its launch
    signature; ``rp``/``pos``/``st``/``en``: the events of the replays used."""
    if not len(rp):
        return PRIOR
    phi = np.zeros(len(rp))
    for r in sorted_unique(rp).tolist():
        k = rp == r
        phi[k] = overlap(st[k].astype(float), en[k].astype(float))[0]
    dur = (en - st).astype(float)
    pairs = _pairs(signature, pos, phi, dur)
    if not pairs:
        return PRIOR
    base = np.array([p[0] for p in pairs])
    added = np.array([p[1] for p in pairs])
    beta, delta = _line(base, added)
    return Calibration("bundle", beta, delta, PRIOR.latency_added_ns, PRIOR.cross_stream_ns,
                       len(pairs), CALIBRATED_UNCERTAINTY_PCT)


def _pairs(signature: Sequence[object], pos: np.ndarray, phi: np.ndarray, x: np.ndarray
           ) -> list[tuple[float, float]]:
    """Per launch signature seen both mostly alone and mostly beside others (at least
    MIN_SAMPLES times each): (median of ``x`` alone, median beside others - that)."""
    by: dict[object, tuple[list[float], list[float]]] = {}
    for p, f, v in zip(pos.tolist(), phi.tolist(), x.tolist()):
        lo, hi = by.setdefault(signature[p], ([], []))
        if f < LOW_PHI:
            lo.append(v)
        elif f > HIGH_PHI:
            hi.append(v)
    return [(float(np.median(lo)), float(np.median(hi)) - float(np.median(lo)))
            for lo, hi in by.values() if len(lo) >= MIN_SAMPLES and len(hi) >= MIN_SAMPLES]


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through (x, y), neither negative; one
    point or one x: a flat line at the median."""
    if len(x) < 2 or float(np.ptp(x)) <= 0:
        return 0.0, max(0.0, float(np.median(y)))
    slope, icpt = np.polyfit(x, y, 1)
    if slope < 0:
        return 0.0, max(0.0, float(np.median(y)))
    if icpt < 0:
        return max(0.0, float((x * y).sum() / (x * x).sum())), 0.0
    return float(slope), float(icpt)


def chains_of(dag: Dag, stream: np.ndarray, cut_dst: np.ndarray) -> np.ndarray:
    """Per node: its chain, a run of one stream's nodes in visit order between
    stream-order-only edges (``cut_dst``: their targets); chains numbered by their place in
    that (stream, visit order) sort."""
    k = np.lexsort((dag.rank, stream))
    heads = np.zeros(dag.n, bool)
    heads[cut_dst] = True
    sk = stream[k]
    start = np.r_[True, sk[1:] != sk[:-1]] | heads[k] if dag.n else np.zeros(0, bool)
    chain = np.empty(dag.n, np.int64)
    chain[k] = np.cumsum(start) - 1
    return chain


def plan_streams(dag: Dag, src: np.ndarray, dst: np.ndarray, chain: np.ndarray,
                 max_streams: int) -> np.ndarray:
    """Per node: the stream (0 .. max_streams - 1) its chain gets, placed as
    ``capture --try-streams`` places ops (module docstring); ``src`` -> ``dst``: the what-if
    DAG."""
    n = dag.n
    if not n:
        return np.zeros(0, np.int64)
    chains = int(chain.max()) + 1
    rank = dag.rank
    first = np.full(chains, n, np.int64)
    np.minimum.at(first, chain, rank)  # by rank
    last = np.full(chains, -1, np.int64)
    np.maximum.at(last, chain, rank)
    order = np.asarray(dag.order, np.int64)
    head = order[first]  # the chain's first node
    # the chains that produce something the chain's first node needs
    is_head = np.zeros(n, bool)
    is_head[head] = True
    into = is_head[dst] & (chain[src] != chain[dst])
    producers: dict[int, list[int]] = {}
    for c, p in zip(chain[dst[into]].tolist(), chain[src[into]].tolist()):
        producers.setdefault(c, []).append(p)
    tail = [-1] * max_streams  # per stream: its last chain
    on = [0] * chains
    last_l = last.tolist()
    for c in np.argsort(first, kind="stable").tolist():
        mine = [p for p in producers.get(c, ()) if tail[on[p]] == p]
        if mine:
            s = on[max(mine, key=last_l.__getitem__)]
        elif -1 in tail:
            s = tail.index(-1)
        else:
            s = min(range(max_streams), key=lambda x: last_l[tail[x]])
        on[c] = s
        tail[s] = c
    return np.asarray(on, np.int64)[chain]


def stream_edges(dag: Dag, stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order of each stream: consecutive nodes of one stream in visit order."""
    if dag.n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    k = np.lexsort((dag.rank, stream))
    same = stream[k][1:] == stream[k][:-1]
    return k[:-1][same], k[1:][same]


DEFAULT_STREAMS = 4  # as ``capture --try-streams 4``


@dataclass(frozen=True)
class Measured:
    """What the diagnosis measured of one graph, for the prediction."""

    solo_ns: np.ndarray  # per node: median duration over the replays used
    latency_ns: np.ndarray  # per node: median dependency gap
    stream: np.ndarray  # per node: its captured stream (-1: no events)
    cols: tuple[np.ndarray, ...]  # (replay, position, start, end) of the replays used
    span_ns: float
    span_spread_pct: float  # half the IQR of the used replays' spans, in % of their median


def predict(dag: Dag, m: Measured, wi_src: np.ndarray, wi_dst: np.ndarray,
            cut_dst: np.ndarray, device: Device,
            max_streams: int = DEFAULT_STREAMS, calibration: Optional[Calibration] = None,
            as_captured_ns: Optional[float] = None) -> tuple[WhatIf, Schedule]:
    """The what-if (module docstring): the prediction and the model's schedule of the graph
    as planned. ``calibration``: this one instead of the bundle's own or :data:`PRIOR`
    (another bundle's, recorded on the same GPU); ``as_captured_ns``: the captured DAG's
    critical path with its latencies, the model of a graph whose nodes ran one at a time."""
    assert dag.order is not None
    res = resources(dag, device, lazy=True)
    rp, pos, st, en = m.cols
    solo, lat = m.solo_ns, m.latency_ns
    cal = calibration or PRIOR
    seen = m.stream[m.stream >= 0]
    concurrent = bool(len(seen)) and bool((seen != seen[0]).any()) and _concurrent(rp, st, en)
    if concurrent:
        cal = calibration or calibrate(_signatures(dag), rp, pos, st, en)
        one = rp == (rp.max() if len(rp) else 0)
        s_, e_ = np.full(dag.n, np.nan), np.full(dag.n, np.nan)
        s_[pos[one]], e_[pos[one]] = st[one], en[one]
        res.ensure(np.ones(dag.n, bool))
        solo, lat = deflate(solo, lat, s_, e_, res, cal)
    if as_captured_ns is not None and not concurrent:
        # one node at a time as captured: the model of it is the path with its latencies
        now_ns = as_captured_ns
    else:
        now_ns = simulate(dag.order, dag.src, dag.dst, solo, lat, res, cal, path=False).span_ns
    chain = chains_of(dag, m.stream, cut_dst)
    planned = plan_streams(dag, wi_src, wi_dst, chain, max_streams)
    a, b = stream_edges(dag, planned)
    src, dst = np.r_[wi_src, a], np.r_[wi_dst, b]
    # a node that waits for another stream's pays the cross-stream dependency
    cross = np.zeros(dag.n, bool)
    cross[wi_dst[planned[wi_src] != planned[wi_dst]]] = True
    wi = simulate(dag.order, src, dst, solo, lat + cal.cross_stream_ns * cross, res, cal)
    scale = m.span_ns / now_ns if now_ns > 0 else 1.0
    pred = wi.span_ns * scale
    u = cal.uncertainty_pct / 100.0
    best = wi.span_ns - (wi.contention_on_path_ns - wi.contention_best_on_path_ns)
    noise = m.span_spread_pct / 100.0
    low = (min(best, wi.span_ns) - u * wi.interference_on_path_ns) * scale * (1 - noise)
    high = (wi.span_ns + u * wi.interference_on_path_ns) * scale * (1 + noise)
    cc = device.compute_capability
    out = WhatIf(
        max_streams=max_streams, streams=len(set(planned.tolist())),
        chains=int(chain.max()) + 1 if dag.n else 0, predicted_span_ns=pred,
        low_ns=max(0.0, low), high_ns=high, measured_span_ns=m.span_ns,
        gain_ns=m.span_ns - pred,
        gain_pct=100.0 * (m.span_ns - pred) / m.span_ns if m.span_ns else 0.0,
        model_as_captured_ns=now_ns, model_what_if_ns=wi.span_ns,
        no_contention_ns=wi.solo_span_ns * scale, calibration=cal, gpu=device.name,
        sm_count=device.sm_count, compute_capability=f"{cc[0]}.{cc[1]}",
        device_source=device.source,
        registers="worst_case" if res.registers_assumed else "recorded")
    return out, wi


def _concurrent(rp: np.ndarray, st: np.ndarray, en: np.ndarray) -> bool:
    """Whether any two events of one replay overlap."""
    if len(rp) < 2:
        return False
    k = np.lexsort((st, rp))
    r, s, e = rp[k], st[k], en[k]
    reach = np.maximum.accumulate(e)  # across replays too: replays do not overlap each other
    return bool(((s[1:] < reach[:-1]) & (r[1:] == r[:-1])).any())


def _signatures(dag: Dag) -> list[object]:
    """Per node: its launch signature (kernel, grid, block, shared memory; bytes for copies)."""
    return [(x.type, x.kernel, x.grid, x.block, x.smem, x.bytes) for x in dag.nodes]

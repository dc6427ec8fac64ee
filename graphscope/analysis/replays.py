"""Where a replay's span goes, from its events: the columns of a graph's events, each
replay's span, idle, concurrency and dependency gaps, each node's median dependency gap, and
the time a launch queued behind earlier replays (the definitions: ``diagnosis.py``'s module
docstring). Pure functions of a Bundle and numpy arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any, Optional

import numpy as np

from ..model.graph import Bundle
from .dag import Dag


def events_by_graph(bundle: Bundle) -> dict[str, Sequence[Mapping[str, Any]]]:
    """The kept events of each graph, by name (the model's grouping); a bundle of one graph
    gives it all its events (those of no node of it are left out when joined)."""
    if len(bundle.graphs) == 1:
        return {bundle.graphs[0].name: bundle.events}
    return {str(k): v for k, v in bundle.events_by_graph.items()}


def launches_of(bundle: Bundle) -> dict[tuple[str, int], tuple[int, int]]:
    return {(str(x["graph"]), int(x["replay"])): (int(x["start_ns"]), int(x["end_ns"]))
            for x in getattr(bundle, "launches", ())}


def bundle_busy(bundle: Bundle) -> dict[tuple[str, int], int]:
    """:func:`busy_until` over every graph of ``bundle``, from its events (kept on it: the
    views of its graphs share it)."""
    got = bundle.__dict__.get("busy_until")
    if got is not None:
        return got
    evs = bundle.events
    spans: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if evs:
        m = len(evs)
        names = [str(e.get("graph")) for e in evs]
        rp, st, du = (np.fromiter(map(itemgetter(k), evs), np.int64, m)
                      for k in ("replay", "start_ns", "dur_ns"))
        uniq, code = np.unique(np.array(names, dtype=object).astype(str), return_inverse=True)
        o = np.argsort(code, kind="stable")
        cut = np.flatnonzero(np.r_[True, code[o][1:] != code[o][:-1]])
        for g, part in zip(uniq[code[o][cut]].tolist(), np.split(o, cut[1:])):
            spans[g] = (rp[part], st[part], st[part] + du[part])
    busy = busy_until(spans)
    bundle.__dict__["busy_until"] = busy
    return busy


def busy_until(spans: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
                ) -> dict[tuple[str, int], int]:
    """Per replay with events: the end of the last node of every replay (any graph) that
    started before it, on the events' clock: until then its launch queued behind them.
    ``spans``: per graph, its events' (replay, start, end) columns."""
    keys: list[tuple[str, int]] = []
    firsts, lasts = [], []
    for gname, (rp, st, en) in spans.items():
        if not len(rp):
            continue
        o = np.argsort(rp, kind="stable")
        r = rp[o]
        cut = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
        firsts.append(np.minimum.reduceat(st[o], cut))
        lasts.append(np.maximum.reduceat(en[o], cut))
        keys += [(gname, int(x)) for x in r[cut].tolist()]
    if not keys:
        return {}
    f, la = np.concatenate(firsts), np.concatenate(lasts)
    o = np.argsort(f, kind="stable")
    reach = np.maximum.accumulate(la[o])
    return {keys[k]: int(reach[i - 1]) for i, k in enumerate(o.tolist()) if i}


def replay_metrics(dag: Dag, pos: np.ndarray, start: np.ndarray, end: np.ndarray,
                    launch: Optional[tuple[int, int]], busy: Optional[int] = None
                    ) -> dict[str, Any]:
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
                           "launch_call_ns": None, "launch_queued_ns": None, "tail_ns": None}
    if launch is not None:
        ready = launch[0] if busy is None else max(launch[0], min(busy, t0))
        out["launch_ns"] = t0 - ready
        out["launch_queued_ns"] = ready - launch[0]
        out["launch_call_ns"] = launch[1] - launch[0]
    return out


def node_gaps(dag: Dag, rp: np.ndarray, pos: np.ndarray, st: np.ndarray,
               en: np.ndarray) -> np.ndarray:
    """Per node: the median over replays of its start - its last timed predecessor's end
    (>= 0; 0 where never measured)."""
    n = dag.n
    if not len(rp) or not len(dag.src):
        return np.zeros(n)
    rows = []
    for r in np.unique(rp).tolist():
        k = rp == r
        s_, e_ = np.full(n, np.nan), np.full(n, np.nan)
        s_[pos[k]], e_[pos[k]] = st[k], en[k]
        last = np.full(n, -np.inf)
        pe = e_[dag.src]
        ok = ~np.isnan(pe)
        np.maximum.at(last, dag.dst[ok], pe[ok])
        gap = s_ - last
        gap[~np.isfinite(gap)] = np.nan
        rows.append(np.clip(gap, 0, None))
    m = np.array(rows)
    have = ~np.isnan(m).all(axis=0)
    out = np.zeros(n)
    if have.any():
        out[have] = np.nanmedian(m[:, have], axis=0)
    return out


def event_columns(evs: Sequence[Mapping[str, Any]], ids: np.ndarray
                   ) -> tuple[np.ndarray, ...]:
    """(replay, position, start, end, stream or -1) of the events of a graph's nodes (``ids``:
    their exec node ids by position)."""
    m = len(evs)
    ex, rp, st, du = (np.fromiter(map(itemgetter(k), evs), np.int64, m)
                      for k in ("exec_node_id", "replay", "start_ns", "dur_ns"))
    sm = np.fromiter((-1 if (s := e.get("stream")) is None else s for e in evs), np.int64, m)
    srt = np.argsort(ids, kind="stable")
    i = np.clip(np.searchsorted(ids[srt], ex), 0, max(len(ids) - 1, 0))
    ok = ids[srt][i] == ex if len(ids) else np.zeros(m, bool)
    pos = srt[i] if len(ids) else i
    return rp[ok], pos[ok], st[ok], st[ok] + du[ok], sm[ok]

"""Where a replay's span goes, from its events: the columns of a graph's events, each
replay's span, idle, concurrency and dependency gaps, each node's median dependency gap, and
the time a launch queued behind earlier replays (the definitions: ``diagnosis.py``'s module
docstring). Pure functions of a Bundle and numpy arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Optional

import numpy as np

from ..model.bundle import Bundle
from ..model.graph import UNATTRIBUTED
from .dag import Dag, sorted_unique


def module_runs(events: Sequence[Mapping[str, Any]], nodes: Mapping[int, Any]
                ) -> list[tuple[Any, Any, str, int, int, int]]:
    """``(graph, replay, module prefix, start ns, end ns, nodes)`` for each run of consecutive
    events (by start, all streams, within one graph's replay) whose module has that prefix, at
    every depth (``nodes``: exec node id -> its Node). Work outside every module ends every run.
    A run ends at its work's last end, or where the next run at its depth (or above) starts if
    that is earlier (work on another stream may still run on): the runs of one depth never
    overlap and a prefix's runs lie inside its parent's, as trace viewers need nested slices
    to be. Ordered by start, a parent before its children. The HTML timeline and annotate-trace
    (csrc/tracejson.cpp ``ModuleSpans``) draw the same runs."""
    groups: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
    for e in events:
        groups.setdefault((e["graph"], e["replay"]), []).append(e)
    out: list[tuple[Any, Any, str, int, int, int]] = []
    for (graph, replay), evs in groups.items():
        evs = sorted(evs, key=lambda e: (e["start_ns"], e["start_ns"] + e["dur_ns"]))
        open_: list[list[Any]] = []  # per depth: [prefix, start, end, nodes]

        def close(depth: int, at: Optional[int], open_: list[list[Any]] = open_,
                  graph: Any = graph, replay: Any = replay) -> None:
            while len(open_) > depth:  # the deepest first
                prefix, t0, t1, k = open_.pop()
                out.append((graph, replay, prefix, t0, t1 if at is None else min(t1, at), k))

        for e in evs:
            n = nodes.get(int(e["exec_node_id"]))
            module = n.module if n is not None else UNATTRIBUTED
            parts = module.split(".") if module != UNATTRIBUTED else []
            t0, t1 = int(e["start_ns"]), int(e["start_ns"]) + int(e["dur_ns"])
            d = 0
            while d < len(open_) and d < len(parts) and open_[d][0] == ".".join(parts[: d + 1]):
                open_[d][2] = max(open_[d][2], t1)
                open_[d][3] += 1
                d += 1
            close(d, t0)
            open_.extend([".".join(parts[: k + 1]), t0, t1, 1] for k in range(d, len(parts)))
        close(0, None)
    out.sort(key=lambda r: (r[3], r[2].count(".")))
    return out


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
    for r in sorted_unique(rp).tolist():
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


_FIELDS = itemgetter("exec_node_id", "replay", "start_ns", "dur_ns")


def event_columns(evs: Sequence[Mapping[str, Any]], ids: np.ndarray
                   ) -> tuple[np.ndarray, ...]:
    """(replay, position, start, end, stream or -1) of the events of a graph's nodes (``ids``:
    their exec node ids by position)."""
    m = len(evs)
    # the four fields of each event in one itemgetter call, into one (m, 4) array
    ex, rp, st, du = np.fromiter(chain.from_iterable(map(_FIELDS, evs)), np.int64,
                                 4 * m).reshape(m, 4).T.copy()
    try:  # dict.get in C per event; a stream recorded as null falls back to the Python walk
        sm = np.fromiter(map(dict.get, evs, repeat("stream"), repeat(-1)),  # type: ignore[arg-type]
                         np.int64, m)
    except TypeError:
        sm = np.fromiter((-1 if (s := e.get("stream")) is None else s for e in evs), np.int64,
                         m)
    srt = np.argsort(ids, kind="stable")
    i = np.clip(np.searchsorted(ids[srt], ex), 0, max(len(ids) - 1, 0))
    ok = ids[srt][i] == ex if len(ids) else np.zeros(m, bool)
    pos = srt[i] if len(ids) else i
    return rp[ok], pos[ok], st[ok], st[ok] + du[ok], sm[ok]

"""Join CUPTI activity records of graph replays onto captured nodes.

Key: a record's ``graphNodeId`` equals ``exec_id << 32 | local_id`` of the exec node that ran
it, and each node's ``exec_node_id`` in the bundle is built the same way. No clock alignment is
needed: durations are ``end - start`` on the GPU's clock; event times are kept relative to the
first joined record, whose CUPTI timestamp is ``origin_ns``.

Replay index: all work of one graph launch shares that launch's correlation id, so within each
exec graph the launches are ranked by correlation id; replay ``r`` is the r-th launch of every
graph (in callables mode: the r-th forward and the r-th backward launch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .graph import NodeKind

# the tracer's record kinds (csrc/tracer.cpp: 0 kernel, 1 memcpy, 2 memset)
KINDS = {0: NodeKind.KERNEL.value, 1: NodeKind.MEMCPY.value, 2: NodeKind.MEMSET.value}


@dataclass
class JoinResult:
    replays: int
    durations_ns: dict[int, list[int]]  # exec node id -> duration per replay
    replay_kernel_ns: list[int]
    replay_span_ns: list[int]
    _events: Any  # list of event dicts, or the columns they are made from on first use
    joined_records: int
    unjoined_records: int  # graph records whose node id matches no captured node
    outside_graph_records: int  # eager work (graphNodeId 0) between replays
    names: dict[int, str] = field(default_factory=dict)  # exec node id -> name seen in trace
    _graph_of: Optional[Mapping[int, str]] = None
    # the host's cudaGraphLaunch interval of each kept replay, on the events' clock and origin:
    # [{"graph", "replay", "start_ns", "end_ns"}] (empty where the tracer recorded none)
    launches: list[dict[str, Any]] = field(default_factory=list)
    outside_graph_ns: int = 0  # GPU time of the eager work (graphNodeId 0) in the windows
    # the CUPTI timestamp the events' times are relative to (the first joined record's start):
    # one clock for every process of a host, so ranks' events can be put side by side
    origin_ns: Optional[int] = None

    @property
    def events(self) -> list[dict[str, Any]]:
        """Events of the first ``keep_events`` replays, by start time. Made on first use: a
        caller that wants only durations (graphscope.profile's tables) never pays for
        them."""
        if isinstance(self._events, tuple):
            r, g, s, d, sm, k = self._events
            graph_of = self._graph_of or {}
            names = [KINDS.get(i, "?") for i in range(max(KINDS) + 1)]
            self._events = [
                {"replay": r_, "graph": graph_of[g_], "exec_node_id": g_, "start_ns": s_,
                 "dur_ns": d_, "stream": sm_, "kind": names[k_] if 0 <= k_ < len(names) else "?"}
                for r_, g_, s_, d_, sm_, k_ in zip(r.tolist(), g.tolist(), s.tolist(),
                                                   d.tolist(), sm.tolist(), k.tolist())]
        return self._events


def join(
    graph_node_id: np.ndarray,
    correlation: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    stream: np.ndarray,
    kind: np.ndarray,
    exec_node_ids: Mapping[int, str],
    keep_events: int = 3,
    launches: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None,
    join_records: Optional[Callable[..., Any]] = None,
) -> JoinResult:
    """Join activity columns onto ``exec_node_ids`` ({exec node id: graph name}).

    ``launches``: the tracer's cudaGraphLaunch records as (correlation, start, end) columns;
    each becomes the host interval of the replay whose nodes carry its correlation id.

    ``join_records``: the native join (csrc/join.cpp, the extension's ``join_records``, handed
    in by the capture layer: the data layer never loads the extension), else
    :func:`join_numpy`; the two agree field for field (tests/unit/test_join.py).
    """
    if join_records is None:
        return join_numpy(graph_node_id, correlation, start_ns, end_ns, stream, kind,
                          exec_node_ids, keep_events, launches)
    gnid = np.ascontiguousarray(graph_node_id, dtype=np.uint64)
    st = np.ascontiguousarray(start_ns, dtype=np.int64)
    en = np.ascontiguousarray(end_ns, dtype=np.int64)
    known = np.sort(np.fromiter(exec_node_ids.keys(), dtype=np.uint64,
                                count=len(exec_node_ids)))
    d = join_records(gnid.tobytes(), np.ascontiguousarray(correlation, dtype=np.int64)
                         .tobytes(), st.tobytes(), en.tobytes(), known.tobytes(),
                         int(keep_events))
    n_replays = int(d["replays"])
    dur = en - st
    durations = _durations(d, known, dur, n_replays)
    events: Any = []
    ev = np.frombuffer(d["events"], dtype=np.int64)
    if len(ev):
        replay = np.frombuffer(d["replay"], dtype=np.int32)
        events = (replay[ev].astype(np.int64), gnid[ev], st[ev] - int(d["t0"]), dur[ev],
                  np.asarray(stream)[ev], np.asarray(kind)[ev])
    return JoinResult(
        replays=n_replays,
        durations_ns=durations,
        replay_kernel_ns=np.frombuffer(d["kernel_ns"], dtype=np.int64).tolist(),
        replay_span_ns=np.frombuffer(d["span_ns"], dtype=np.int64).tolist(),
        _events=events,
        joined_records=int(d["joined"]),
        unjoined_records=int(d["unjoined"]),
        outside_graph_records=int(d["outside"]),
        _graph_of=exec_node_ids,
        launches=launch_windows(gnid, correlation, exec_node_ids, launches, int(d["t0"]),
                                keep_events) if len(ev) else [],
        origin_ns=int(d["t0"]) if int(d["joined"]) else None,
    )


def _durations(d: Mapping[str, Any], known: np.ndarray, dur: np.ndarray, n_replays: int
               ) -> dict[int, list[int]]:
    """{exec node id: its durations, by replay} from the native join's grouping."""
    order = np.frombuffer(d["order"], dtype=np.int64)
    offsets = np.frombuffer(d["offsets"], dtype=np.int64)
    ds = dur[order]
    present = np.nonzero(np.diff(offsets))[0]
    ids = known[present].tolist()
    if d["regular"] and n_replays:
        return dict(zip(ids, ds.reshape(len(ids), n_replays).tolist()))
    dl = ds.tolist()
    bounds = offsets.tolist()
    return {i: dl[bounds[k]:bounds[k + 1]] for i, k in zip(ids, present.tolist())}


# Long on purpose (~85 lines): the numpy reference of csrc/join.cpp, kept step for step.
# Long on purpose: one vectorised join; split, it hands a dozen arrays around
def join_numpy(
    graph_node_id: np.ndarray,
    correlation: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    stream: np.ndarray,
    kind: np.ndarray,
    exec_node_ids: Mapping[int, str],
    keep_events: int = 3,
    launches: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None,
) -> JoinResult:
    """The join in numpy: the reference the native one is tested against, and the fallback."""
    gnid = np.asarray(graph_node_id, dtype=np.uint64)
    outside = gnid == 0
    known = np.fromiter(exec_node_ids.keys(), dtype=np.uint64, count=len(exec_node_ids))
    hit = np.isin(gnid, known) & ~outside
    unjoined = int((~hit & ~outside).sum())
    idx = np.nonzero(hit)[0]
    gn = gnid[idx]
    corr = np.asarray(correlation, dtype=np.int64)[idx]
    st = np.asarray(start_ns, dtype=np.int64)[idx]
    en = np.asarray(end_ns, dtype=np.int64)[idx]
    exec_of = (gn >> np.uint64(32)).astype(np.int64)
    # Rank launches (correlation ids) within each exec graph, by sorting; np.unique would
    # lazily import numpy.ma, which alone costs more than the whole join.
    replay = np.zeros(len(idx), dtype=np.int64)
    n_replays = 0
    if len(idx):
        order = np.lexsort((corr, exec_of))
        e_s, c_s = exec_of[order], corr[order]
        new_exec = np.ones(len(order), dtype=bool)
        new_exec[1:] = e_s[1:] != e_s[:-1]
        new_launch = new_exec.copy()
        new_launch[1:] |= c_s[1:] != c_s[:-1]
        launch_no = np.cumsum(new_launch) - 1
        first = np.maximum.accumulate(np.where(new_exec, launch_no, 0))
        replay[order] = launch_no - first
        n_replays = int(replay.max()) + 1
    dur = en - st
    durations: dict[int, list[int]] = {}
    if len(idx):
        order = np.lexsort((replay, gn))
        gs, ds = gn[order], dur[order]
        cut = np.nonzero(gs[1:] != gs[:-1])[0] + 1
        n_nodes = len(cut) + 1
        if len(gs) == n_nodes * n_replays and (n_nodes == 1 or (
                cut == np.arange(1, n_nodes) * n_replays).all()):
            # every node ran once per replay (the usual case): one reshape, one tolist
            ids = gs[::n_replays].tolist()
            durations = dict(zip(ids, ds.reshape(n_nodes, n_replays).tolist()))
        else:
            cuts = cut.tolist()
            gl, dl = gs.tolist(), ds.tolist()
            for a, b in zip([0, *cuts], [*cuts, len(gs)]):
                durations[int(gl[a])] = dl[a:b]
    kernel_ns = np.bincount(replay, weights=dur, minlength=n_replays).astype(np.int64)
    span = [0] * n_replays
    if len(idx):
        last = np.full(n_replays, np.iinfo(np.int64).min)
        first_t = np.full(n_replays, np.iinfo(np.int64).max)
        np.maximum.at(last, replay, en)
        np.minimum.at(first_t, replay, st)
        span = [int(x) for x in (last - first_t)]
    events: Any = []
    t0 = int(st.min()) if len(idx) else 0
    if len(idx):
        keep = np.nonzero(replay < keep_events)[0]
        keep = keep[np.argsort(st[keep], kind="stable")]
        kidx = idx[keep]
        events = (replay[keep], gn[keep], st[keep] - t0, dur[keep],
                  np.asarray(stream)[kidx], np.asarray(kind)[kidx])
    return JoinResult(
        replays=n_replays,
        durations_ns=durations,
        replay_kernel_ns=[int(x) for x in kernel_ns],
        replay_span_ns=span,
        _events=events,
        joined_records=len(idx),
        unjoined_records=unjoined,
        outside_graph_records=int(outside.sum()),
        _graph_of=exec_node_ids,
        launches=launch_windows(gnid, correlation, exec_node_ids, launches, t0, keep_events)
        if len(idx) else [],
        origin_ns=t0 if len(idx) else None,
    )


def launch_windows(
    graph_node_id: np.ndarray,
    correlation: np.ndarray,
    exec_node_ids: Mapping[int, str],
    launches: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]],
    t0: int,
    keep_events: int,
) -> list[dict[str, Any]]:
    """The cudaGraphLaunch host interval of each replay kept as events.

    Key: a launch record's correlation id is the one every node of that launch carries; the
    replay index is that correlation's rank among the exec graph's launches (as in the join).
    Clock: CUPTI puts API and GPU records on one timestamp base, so times are made relative to
    ``t0``, the events' origin (a launch usually starts before it: negative times are real).
    """
    if launches is None or not len(launches[0]):
        return []
    lc, ls, le = (np.asarray(c, dtype=np.int64) for c in launches)
    gnid = np.asarray(graph_node_id, dtype=np.uint64)
    known = np.fromiter(exec_node_ids.keys(), dtype=np.uint64, count=len(exec_node_ids))
    hit = np.isin(gnid, known)
    exec_of = (gnid[hit] >> np.uint64(32)).astype(np.int64)
    corr = np.asarray(correlation, dtype=np.int64)[hit]
    order = np.lexsort((corr, exec_of))
    e_s, c_s = exec_of[order], corr[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (e_s[1:] != e_s[:-1]) | (c_s[1:] != c_s[:-1])
    e_u, c_u = e_s[first], c_s[first]  # one row per launch, by exec then correlation
    new_exec = np.ones(len(e_u), dtype=bool)
    new_exec[1:] = e_u[1:] != e_u[:-1]
    n = np.arange(len(e_u))
    replay = n - np.maximum.accumulate(np.where(new_exec, n, 0))
    name_of = {int(k) >> 32: v for k, v in exec_node_ids.items()}
    by_corr = {c: (name_of[e], r) for e, c, r in
               zip(e_u.tolist(), c_u.tolist(), replay.tolist()) if r < keep_events}
    out = []
    for c, s, e in zip(lc.tolist(), ls.tolist(), le.tolist()):
        hit_ = by_corr.get(c)
        if hit_ is not None:
            out.append({"graph": hit_[0], "replay": hit_[1], "start_ns": s - t0,
                        "end_ns": e - t0})
    out.sort(key=lambda x: (x["start_ns"], x["graph"], x["replay"]))
    return out

"""Join CUPTI activity records of graph replays onto captured nodes.

Key: a record's ``graphNodeId`` equals ``exec_id << 32 | local_id`` of the exec node that ran
it, and each node's ``exec_node_id`` in the bundle is built the same way. No clock alignment is
needed: durations are ``end - start`` on the GPU's clock; event times are kept relative to the
first joined record.

Replay index: all work of one graph launch shares that launch's correlation id, so within each
exec graph the launches are ranked by correlation id; replay ``r`` is the r-th launch of every
graph (in callables mode: the r-th forward and the r-th backward launch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = {0: "kernel", 1: "memcpy", 2: "memset"}


@dataclass
class JoinResult:
    replays: int
    durations_ns: dict[int, list[int]]  # exec node id -> duration per replay
    replay_kernel_ns: list[int]
    replay_span_ns: list[int]
    events: list[dict[str, Any]]
    joined_records: int
    unjoined_records: int  # graph records whose node id matches no captured node
    outside_graph_records: int  # eager work (graphNodeId 0) between replays
    names: dict[int, str] = field(default_factory=dict)  # exec node id -> name seen in trace


def join(
    graph_node_id: np.ndarray,
    correlation: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    stream: np.ndarray,
    kind: np.ndarray,
    exec_node_ids: Mapping[int, str],
    keep_events: int = 3,
) -> JoinResult:
    """Join activity columns onto ``exec_node_ids`` ({exec node id: graph name})."""
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
    replay = np.zeros(len(idx), dtype=np.int64)
    n_replays = 0
    for e in np.unique(exec_of):
        sel = exec_of == e
        launches, inv = np.unique(corr[sel], return_inverse=True)
        replay[sel] = inv
        n_replays = max(n_replays, len(launches))
    dur = en - st
    durations: dict[int, list[int]] = {}
    order = np.lexsort((replay, gn))
    for i in order.tolist():
        durations.setdefault(int(gn[i]), []).append(int(dur[i]))
    kernel_ns = np.bincount(replay, weights=dur, minlength=n_replays).astype(np.int64)
    span = []
    for r in range(n_replays):
        sel = replay == r
        span.append(int(en[sel].max() - st[sel].min()) if sel.any() else 0)
    events: list[dict[str, Any]] = []
    if len(idx):
        t0 = int(st.min())
        strm = np.asarray(stream)[idx]
        knd = np.asarray(kind)[idx]
        for i in np.argsort(st, kind="stable").tolist():
            if replay[i] >= keep_events:
                continue
            events.append(
                {
                    "replay": int(replay[i]),
                    "graph": exec_node_ids[int(gn[i])],
                    "exec_node_id": int(gn[i]),
                    "start_ns": int(st[i]) - t0,
                    "dur_ns": int(dur[i]),
                    "stream": int(strm[i]),
                    "kind": KINDS.get(int(knd[i]), "?"),
                }
            )
    return JoinResult(
        replays=n_replays,
        durations_ns=durations,
        replay_kernel_ns=[int(x) for x in kernel_ns],
        replay_span_ns=span,
        events=events,
        joined_records=len(idx),
        unjoined_records=unjoined,
        outside_graph_records=int(outside.sum()),
    )

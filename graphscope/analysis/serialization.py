"""False serialization: the data DAG of a graph's memory ranges, its stream-order-only edges
and the what-if critical path without them, strictly and with the memory renamed (the
definitions: ``diagnosis.py``'s module docstring, "False serialization")."""

from __future__ import annotations

from collections import Counter
from itertools import chain
from typing import Any

import numpy as np

from ..model.graph import UNATTRIBUTED, CapturedGraph
from .dag import Dag, csr, longest, sorted_unique

TOP = 10  # chains listed
MAX_LISTED_EDGES = 50  # stream-order-only edges listed (all are counted)
REACH_BUDGET = 5_000_000  # node visits for the reachability checks of one graph


# Long on purpose (~85 lines): one vectorised sweep; split, it would pass ten arrays.
def _data_edges(g: CapturedGraph, order: list[int]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The data DAG's edges (src, dst positions; an edge may repeat) and which nodes have no
    op information (module docstring). Vectorised: every (node, elementary segment,
    read/write) access, sorted by segment and visit rank; per access its segment's previous
    write, and per read the segment's next write; barriers likewise over the visit order.
    The fourth column marks the edges that stay when the memory is renamed (``renamed``):
    read-after-write and the barriers' edges."""
    n = len(g.nodes)
    rank = np.empty(n, np.int64)
    rank[np.asarray(order, np.int64)] = np.arange(n)
    reads = [x.reads for x in g.nodes]
    writes = [x.writes for x in g.nodes]
    hard = np.fromiter((r is None and w is None for r, w in zip(reads, writes)), bool, n)
    rc = np.fromiter((len(r) if r else 0 for r in reads), np.int64, n)
    wc = np.fromiter((len(w) if w else 0 for w in writes), np.int64, n)
    flat = chain.from_iterable(chain.from_iterable(x for x in reads + writes if x))
    total = int(rc.sum() + wc.sum())
    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    raws: list[np.ndarray] = []
    if total:
        ranges = np.fromiter(flat, np.int64, 2 * total).reshape(-1, 2)
        keep = ranges[:, 1] > ranges[:, 0]
        ranges = ranges[keep]
        node = np.r_[np.repeat(np.arange(n), rc), np.repeat(np.arange(n), wc)][keep]
        isw = np.r_[np.zeros(int(rc.sum()), bool), np.ones(int(wc.sum()), bool)][keep]
        bounds = sorted_unique(ranges.ravel())
        lo = np.searchsorted(bounds, ranges[:, 0])
        cnt = np.searchsorted(bounds, ranges[:, 1]) - lo
        # one row per (access, elementary segment); most ranges are one segment
        if bool((cnt == 1).all()):
            seg = lo
        else:
            rep = np.repeat(np.arange(len(lo)), cnt)
            seg = lo[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
            node, isw = node[rep], isw[rep]
        # by segment, then visit rank, reads before writes within a node: one int64 key
        # (rows with equal keys are interchangeable)
        k = np.argsort((seg * n + rank[node]) * 2 + isw)
        seg, node, isw = seg[k], node[k], isw[k]
        idx = np.arange(len(seg))
        first = np.r_[True, seg[1:] != seg[:-1]]
        # previous write in the segment (strictly before): RAW and WAW
        wpos = np.where(isw, idx, -1)
        start_of = np.maximum.accumulate(np.where(first, idx, 0))
        last_w = np.maximum.accumulate(wpos)
        prev_w = np.r_[-1, last_w[:-1]]
        ok = (prev_w >= start_of) & (prev_w >= 0)
        srcs.append(node[prev_w[ok]])
        dsts.append(node[ok])
        raws.append(~isw[ok])
        # next write in the segment (strictly after) for reads: WAR
        big = len(seg)
        nxt = np.where(isw, idx, big)[::-1]
        last_in = np.r_[np.flatnonzero(first)[1:], big] - 1  # last row of each segment
        end_of = np.repeat(last_in, np.diff(np.r_[np.flatnonzero(first), big]))
        next_w = np.minimum.accumulate(nxt)[::-1]
        next_w = np.r_[next_w[1:], big]
        ok = ~isw & (next_w <= end_of)
        srcs.append(node[ok])
        dsts.append(node[next_w[ok]])
        raws.append(np.zeros(int(ok.sum()), bool))
    # barriers: nodes without op info, over the visit order
    ordr = np.asarray(order, np.int64)
    hv = hard[ordr]
    if hv.any():
        idx = np.arange(n)
        last_b = np.maximum.accumulate(np.where(hv, idx, -1))
        prev_b = np.r_[-1, last_b[:-1]]
        ok = prev_b >= 0
        srcs.append(ordr[prev_b[ok]])
        dsts.append(ordr[ok])
        raws.append(np.ones(int(ok.sum()), bool))
        nxt = np.minimum.accumulate(np.where(hv, idx, n)[::-1])[::-1]
        next_b = np.r_[nxt[1:], n]
        ok = ~hv & (next_b < n)
        srcs.append(ordr[ok])
        dsts.append(ordr[next_b[ok]])
        raws.append(np.ones(int(ok.sum()), bool))
    if srcs:
        s, d = np.concatenate(srcs), np.concatenate(dsts)
        keep = s != d
        return s[keep], d[keep], hard, np.concatenate(raws)[keep]  # may repeat an edge
    return np.zeros(0, np.int64), np.zeros(0, np.int64), hard, np.zeros(0, bool)


def serialization(g: CapturedGraph, dag: Dag, d: list[float], stream: np.ndarray,
                   dag_cp: float, cp_path: list[int], work: float) -> dict[str, Any]:
    """Stream-order-only edges and the what-if path (module docstring), strictly and with
    the memory renamed.

    Renamed: within a capture the caching allocator hands a block freed by one chain to the
    next op of any chain on that stream, so two independent chains meet in write-after-read
    and write-after-write conflicts on reused blocks. Those orderings come from the
    allocation, not the data: run on two streams the chains get blocks of their own (the
    allocator keeps streams' blocks apart), at the cost of more pool memory. ``renamed``
    repeats the analysis with read-after-write edges alone; an in-place update that a
    read elsewhere must precede is a real write-after-read that renaming drops too, so it is
    the looser bound of the two."""
    n = dag.n
    assert dag.order is not None
    if all(getattr(nd, "reads", None) is None and getattr(nd, "writes", None) is None
           for nd in g.nodes):
        return {"op_info": False, "nodes_without_op_info": n,
                "note": "no memory ranges recorded (bundle from before reads/writes): "
                        "every edge kept"}
    data = _data_edges(g, dag.order)
    out = _what_if(g, dag, d, stream, dag_cp, cp_path, work, data, raw_only=False)
    renamed = _what_if(g, dag, d, stream, dag_cp, cp_path, work, data, raw_only=True)
    renamed.pop("nodes_without_op_info", None)
    renamed.pop("op_info", None)
    out["renamed"] = renamed
    return out


def _what_if(g: CapturedGraph, dag: Dag, d: list[float], stream: np.ndarray,
             dag_cp: float, cp_path: list[int], work: float,
             data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
             raw_only: bool) -> dict[str, Any]:
    n = dag.n
    assert dag.order is not None
    ds, dd, hard, raw = data
    if raw_only:
        ds, dd = ds[raw], dd[raw]
    a, b = dag.src, dag.dst
    sa, sb = stream[a], stream[b]
    kept = hard[a] | hard[b] | ((sa >= 0) & (sb >= 0) & (sa != sb))
    if raw_only and len(a):
        # the kernels of one op call (the same ranges: a GEMM and its split-K reduction)
        # stay in order: their write-after-write is the op's own, not the allocator's
        nodes = g.nodes
        kept |= np.fromiter(
            (nodes[x].writes == nodes[y].writes and nodes[x].reads == nodes[y].reads
             for x, y in zip(a.tolist(), b.tolist())), bool, len(a))
    nn = max(n, 1)
    wkey = sorted_unique(np.concatenate([ds * nn + dd, a[kept] * nn + b[kept]]))
    ws, wd = wkey // nn, wkey % nn
    ekey = a * nn + b
    at = np.clip(np.searchsorted(wkey, ekey), 0, max(len(wkey) - 1, 0))
    cand = ~kept & ~((wkey[at] == ekey) if len(wkey) else np.zeros(len(ekey), bool))
    wsucc = csr(n, ws, wd)
    wpred = csr(n, wd, ws)
    rank_a = np.empty(n, np.int64)
    rank_a[np.asarray(dag.order, np.int64)] = np.arange(n)
    rank = rank_a.tolist()
    false_edges: list[tuple[int, int]] = []
    budget = REACH_BUDGET
    unchecked = 0
    for x, y in zip(a[cand].tolist(), b[cand].tolist()):
        if budget <= 0:
            unchecked += 1
            continue
        found, budget = _reaches(wsucc, rank, x, y, budget)
        if not found and budget > 0:
            false_edges.append((x, y))
        elif not found:
            unchecked += 1
    if false_edges or unchecked:
        length, path, _ = longest(dag.order, wsucc, wpred, d, ws, wd, slack=False)
    else:  # every captured ordering is kept: nothing to gain
        length, path = dag_cp, cp_path
    out: dict[str, Any] = {
        "op_info": True,
        "nodes_without_op_info": int(hard.sum()),
        "what_if_edges": len(wkey),  # data DAG plus kept edges
        "stream_order_only_edges": len(false_edges),
        "edges": [[g.nodes[x].local_id, g.nodes[y].local_id]
                  for x, y in false_edges[:MAX_LISTED_EDGES]],
        "what_if_ns": length,
        "what_if_path": [g.nodes[i].local_id for i in path],
        "gain_ns": dag_cp - length,
        "gain_pct": 100.0 * (dag_cp - length) / dag_cp if dag_cp else 0.0,
        "what_if_parallelism": work / length if length else None,
        "chains": _chains(g, dag, d, stream, false_edges) if false_edges else [],
    }
    if unchecked:
        out["unchecked_edges"] = unchecked
    return out


def _reaches(succ: tuple[list[int], list[int]], rank: list[int], a: int, b: int, budget: int
             ) -> tuple[bool, int]:
    """Whether b is reachable from a (visiting only nodes ranked before b)."""
    ptr, val = succ
    limit = rank[b]
    stack = [a]
    seen = {a}
    while stack:
        u = stack.pop()
        budget -= 1
        if budget <= 0:
            return False, 0
        for v in val[ptr[u]:ptr[u + 1]]:
            if v == b:
                return True, budget
            if v not in seen and rank[v] < limit:
                seen.add(v)
                stack.append(v)
    return False, budget


def _chains(g: CapturedGraph, dag: Dag, d: list[float], stream: np.ndarray,
            cut: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Runs of one stream's nodes (in visit order) between stream-order-only edges, largest
    work first."""
    assert dag.order is not None
    ordr = np.asarray(dag.order, np.int64)
    rank = np.empty(dag.n, np.int64)
    rank[ordr] = np.arange(dag.n)
    k = np.lexsort((rank, stream))  # by stream, then visit order
    heads = np.zeros(dag.n, bool)
    heads[[b for _, b in cut]] = True
    sk = stream[k]
    start = np.r_[True, sk[1:] != sk[:-1]] | heads[k]
    run = np.cumsum(start) - 1
    work = np.bincount(run, weights=np.asarray(d)[k])
    first = np.flatnonzero(start)
    lastpos = np.r_[first[1:], len(k)] - 1
    top = np.lexsort((first, -work))[:TOP]
    rows = []
    for r in top.tolist():
        members = k[first[r]:lastpos[r] + 1].tolist()
        mods = Counter(g.nodes[i].module for i in members if g.nodes[i].is_work)
        rows.append({"first": g.nodes[members[0]].local_id,
                     "last": g.nodes[members[-1]].local_id, "nodes": len(members),
                     "work_ns": float(work[r]), "stream": int(sk[first[r]]),
                     "module": mods.most_common(1)[0][0] if mods else UNATTRIBUTED})
    return rows

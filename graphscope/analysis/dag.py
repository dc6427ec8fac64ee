"""A captured graph as a DAG over node positions: edges as arrays and CSR adjacency, a
topological order, and the longest (critical) path with every node's slack. Used by the
diagnosis (``diagnosis.py``) and its false-serialization analysis (``serialization.py``)."""

from __future__ import annotations

import heapq
from typing import Optional

import numpy as np

from ..model.graph import CapturedGraph

EPS = 1e-6


class Dag:
    """A graph's nodes by position (index in ``graph.nodes``), its edges between them as
    arrays, CSR adjacency both ways and a topological order."""

    def __init__(self, g: CapturedGraph):
        self.n = n = len(g.nodes)
        lids = np.fromiter((x.local_id for x in g.nodes), dtype=np.int64, count=n)
        e = np.asarray(g.edges, dtype=np.int64).reshape(-1, 2)
        if n and np.array_equal(lids, np.arange(n)):
            src, dst = e[:, 0], e[:, 1]
            ok = (src >= 0) & (src < n) & (dst >= 0) & (dst < n)
        else:
            srt = np.argsort(lids, kind="stable")
            sl = lids[srt]
            i = np.clip(np.searchsorted(sl, e[:, 0]), 0, max(n - 1, 0))
            j = np.clip(np.searchsorted(sl, e[:, 1]), 0, max(n - 1, 0))
            ok = (sl[i] == e[:, 0]) & (sl[j] == e[:, 1]) if n else np.zeros(len(e), bool)
            src, dst = srt[i] if n else i, srt[j] if n else j
        ok &= src != dst
        self.dropped = int(len(e) - ok.sum())  # edges naming no node, or a node itself
        self.src, self.dst = src[ok], dst[ok]
        self.pred = csr(n, self.dst, self.src)
        self.succ = csr(n, self.src, self.dst)
        self.order = _topo_order(n, self.src, self.dst, self.succ)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2's hash-based unique is 40x slower on 300,000 ints)."""
    s = np.sort(x)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def csr(n: int, key: np.ndarray, val: np.ndarray) -> tuple[list[int], list[int]]:
    """(pointers, values) as lists: the values of ``key`` k are values[ptr[k]:ptr[k + 1]]."""
    o = np.argsort(key, kind="stable")
    ptr = np.searchsorted(key[o], np.arange(n + 1))
    return ptr.tolist(), val[o].tolist()


def _topo_order(n: int, src: np.ndarray, dst: np.ndarray, succ: tuple[list[int], list[int]]
                ) -> Optional[list[int]]:
    """Positions in a topological order, the lowest position first among the ready ones
    (capture order when the positions already are one); None on a cycle."""
    if bool(np.all(src < dst)):
        return list(range(n))
    ptr, val = succ
    indeg = np.bincount(dst, minlength=n).tolist()
    ready = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in val[ptr[u]:ptr[u + 1]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, v)
    return order if len(order) == n else None


def longest(order: list[int], succ: tuple[list[int], list[int]],
             pred: tuple[list[int], list[int]], d: list[float], src: np.ndarray,
             dst: np.ndarray, slack: bool = True) -> tuple[float, list[int], np.ndarray]:
    """(length, path positions, slack per node) of the longest path (``slack=False``: the
    backward pass is skipped and slack is empty)."""
    n = len(d)
    if not n:
        return 0.0, [], np.zeros(0)
    pp, pv = pred
    sp, sv = succ
    eft = [0.0] * n
    get = eft.__getitem__
    for v in order:
        a, b = pp[v], pp[v + 1]
        if b - a == 1:  # most nodes: one predecessor
            eft[v] = eft[pv[a]] + d[v]
        else:
            eft[v] = (max(map(get, pv[a:b])) if b > a else 0.0) + d[v]
    length = max(eft)
    eft_a, d_a = np.asarray(eft), np.asarray(d)
    est = eft_a - d_a
    slack_a = np.zeros(0)
    if slack:
        lst = [0.0] * n
        get = lst.__getitem__
        for u in reversed(order):
            a, b = sp[u], sp[u + 1]
            if b - a == 1:
                lst[u] = lst[sv[a]] - d[u]
            else:
                lst[u] = (min(map(get, sv[a:b])) if b > a else length) - d[u]
        slack_a = np.maximum(np.asarray(lst) - est, 0.0)
    # the path: from the last-finishing node (the first such in topological order) back,
    # each node's predecessor being one that finishes at its earliest start (a timed one
    # first, then the earliest in topological order)
    rank = np.empty(n, np.int64)
    rank[np.asarray(order, np.int64)] = np.arange(n)
    ends = np.flatnonzero(eft_a >= length - EPS)
    v = int(ends[np.argmin(rank[ends])])
    crit = np.full(n, -1, np.int64)
    if len(src):
        m = np.abs(eft_a[src] - est[dst]) <= EPS
        u, w = src[m], dst[m]
        k = np.lexsort((-rank[u], d_a[u] > 0, w))  # the last per node is the one chosen
        last = np.r_[w[k][1:] != w[k][:-1], True]
        crit[w[k][last]] = u[k][last]
    crit_l = crit.tolist()
    path = [v]
    while crit_l[v] >= 0:
        v = crit_l[v]
        path.append(v)
    path.reverse()
    return length, path, slack_a

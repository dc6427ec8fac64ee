"""A captured graph as a DAG over node positions: edges as arrays and CSR adjacency, a
topological order, and the longest (critical) path with every node's slack. Used by the
diagnosis (``diagnosis/``), its stream order (``stream_order.py``) and the what-if
(``whatif.py``)."""

from __future__ import annotations

import functools
import heapq
from collections.abc import Sequence
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, Optional

import numpy as np

from ..model.graph import UNATTRIBUTED, WORK_KINDS, CapturedGraph, Node

EPS = 1e-6


class Dag:
    """A graph's nodes by position (index in ``graph.nodes``), its edges between them as
    arrays, CSR adjacency both ways and a topological order; and the nodes' columns that
    the analyses use, read off the nodes in one pass (:func:`_columns`)."""

    def __init__(self, g: CapturedGraph):
        self.nodes = g.nodes
        self.n = n = len(g.nodes)
        (ids, exec_ids, self.types, self.reads, self.writes, self.durations_ns,
         self.ops, self.annotations) = _columns(g.nodes)
        types = self.types
        self.lids = lids = np.array(ids, np.int64)
        self.exec_ids = np.array(exec_ids, np.int64)
        self.is_work = np.fromiter(map(WORK_KINDS.__contains__, types), bool, n)
        e = np.fromiter(chain.from_iterable(g.edges), np.int64, 2 * len(g.edges)).reshape(-1, 2)
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

    @functools.cached_property
    def is_kernel(self) -> list[bool]:
        """Per position: whether the node is a kernel."""
        return list(map("kernel".__eq__, self.types))

    @functools.cached_property
    def is_memcpy(self) -> np.ndarray:
        """Per position: whether the node is a memcpy."""
        return np.fromiter(map("memcpy".__eq__, self.types), bool, self.n)

    @functools.cached_property
    def modules(self) -> list[str]:
        """Module name per position (``Node.module``, read off the annotations in C where
        they are dicts)."""
        try:
            return list(map(str, map(dict.get, self.annotations, repeat("module_name"),
                                     repeat(UNATTRIBUTED))))
        except TypeError:  # an annotation that is another Mapping
            return list(map(attrgetter("module"), self.nodes))

    @functools.cached_property
    def module_codes(self) -> tuple[list[str], np.ndarray]:
        """(distinct module names in first-seen order, each position's index into them)."""
        names = list(dict.fromkeys(self.modules))
        code = dict(zip(names, range(len(names))))
        return names, np.fromiter(map(code.__getitem__, self.modules), np.int64, self.n)

    @functools.cached_property
    def rank(self) -> np.ndarray:
        """Per position: its place in the topological order (which must exist)."""
        assert self.order is not None
        rank = np.empty(self.n, np.int64)
        rank[np.asarray(self.order, np.int64)] = np.arange(self.n)
        return rank


def _columns(nodes: Sequence[Node]) -> tuple[list[Any], ...]:
    """(local ids, exec node ids, types, reads, writes, durations_ns, ops, annotations) of
    ``nodes``, in one pass: reading 100,000 nodes' attributes costs about as much per pass
    as per attribute."""
    cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [], [])
    a, b, c, r, w, t, o, m = (x.append for x in cols)
    for x in nodes:
        a(x.local_id)
        b(x.exec_node_id)
        c(x.type)
        r(x.reads)
        w(x.writes)
        t(x.durations_ns)
        o(x.op)
        m(x.annotation)
    return cols


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2's hash-based unique is 40x slower on 300,000 ints).
    A stable sort (timsort): the keys here come in long sorted runs, which it merges 5-20x
    faster than the default introsort (and 20% slower on shuffled keys)."""
    s = np.sort(x, kind="stable")
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def csr(n: int, key: np.ndarray, val: np.ndarray) -> tuple[list[int], list[int]]:
    """(pointers, values) as lists: the values of ``key`` k are values[ptr[k]:ptr[k + 1]]."""
    o = np.argsort(key, kind="stable")
    ptr = np.r_[0, np.cumsum(np.bincount(key, minlength=n))]
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


def finish_times(order: Sequence[int], pred: tuple[list[int], list[int]], w: list[float]
                 ) -> list[float]:
    """Per position: its earliest finish, ``w[v]`` after the latest of its predecessors'
    (``w[v]`` where it has none)."""
    pp, pv = pred
    eft = [0.0] * len(w)
    get = eft.__getitem__
    for v in order:
        a, b = pp[v], pp[v + 1]
        if b - a == 1:  # most nodes: one predecessor
            eft[v] = eft[pv[a]] + w[v]
        elif b - a == 2:  # as max() picks: the second only where it is larger
            x, y = eft[pv[a]], eft[pv[a + 1]]
            eft[v] = (y if y > x else x) + w[v]
        elif b > a:
            eft[v] = max(map(get, pv[a:b])) + w[v]
        else:
            eft[v] = w[v]
    return eft


def longest(order: list[int], succ: Optional[tuple[list[int], list[int]]],
             pred: tuple[list[int], list[int]], d: list[float], src: np.ndarray,
             dst: np.ndarray, slack: bool = True, rank: Optional[np.ndarray] = None
             ) -> tuple[float, list[int], np.ndarray]:
    """(length, path positions, slack per node) of the longest path (``slack=False``: the
    backward pass is skipped, slack is empty and ``succ`` may be None). ``rank``: each
    position's place in ``order``, where the caller has it."""
    n = len(d)
    if not n:
        return 0.0, [], np.zeros(0)
    eft = finish_times(order, pred, d)
    length = max(eft)
    eft_a, d_a = np.asarray(eft), np.asarray(d)
    est = eft_a - d_a
    slack_a = np.zeros(0)
    if slack:
        assert succ is not None
        sp, sv = succ
        lst = [0.0] * n
        get = lst.__getitem__
        for u in reversed(order):
            a, b = sp[u], sp[u + 1]
            if b - a == 1:
                lst[u] = lst[sv[a]] - d[u]
            elif b - a == 2:  # as min() picks: the second only where it is smaller
                x, y = lst[sv[a]], lst[sv[a + 1]]
                lst[u] = (y if y < x else x) - d[u]
            else:
                lst[u] = (min(map(get, sv[a:b])) if b > a else length) - d[u]
        slack_a = np.maximum(np.asarray(lst) - est, 0.0)
    # the path: from the last-finishing node (the first such in topological order) back,
    # each node's predecessor being one that finishes at its earliest start (a timed one
    # first, then the earliest in topological order)
    if rank is None:
        rank = np.empty(n, np.int64)
        rank[np.asarray(order, np.int64)] = np.arange(n)
    ends = np.flatnonzero(eft_a >= length - EPS)
    v = int(ends[np.argmin(rank[ends])])
    crit = np.full(n, -1, np.int64)
    if len(src):
        m = np.abs(eft_a[src] - est[dst]) <= EPS
        u, w = src[m], dst[m]
        one = np.bincount(w, minlength=n)[w] == 1  # most nodes: one such predecessor
        crit[w[one]] = u[one]
        u, w = u[~one], w[~one]
        k = np.lexsort((-rank[u], d_a[u] > 0, w))  # the last per node is the one chosen
        last = np.r_[w[k][1:] != w[k][:-1], True] if len(k) else np.zeros(0, bool)
        crit[w[k][last]] = u[k][last]
    crit_l = crit.tolist()
    path = [v]
    while crit_l[v] >= 0:
        v = crit_l[v]
        path.append(v)
    path.reverse()
    return length, path, slack_a

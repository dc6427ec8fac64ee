"""Stream order: the data DAG of a graph's memory ranges, the captured edges that only keep the
order of one stream (stream-order-only edges), the chains they cut and the DAG a run over more
streams would have without them (the definitions: the diagnosis package's docstring, "Stream
order").

Fresh outputs are renamed: within a capture the caching allocator hands a block freed by one
chain to the next op of any chain on that stream, so two independent chains meet in
write-after-read and write-after-write conflicts on reused blocks. Those orderings come from
the allocation, not the data: on two streams the chains get blocks of their own (the allocator
keeps streams' blocks apart; ``capture --try-streams`` starts a storage's history anew where
an op's output reuses it). A write-after-read or write-after-write ordering is kept only where
its writer writes in place: an op named in place (``add_``, ``copy_``, ``index_put_``, an
``out`` overload) or one that writes a range it also reads."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import eq
from typing import Any, Optional

import numpy as np

from ..model.graph import UNATTRIBUTED
from .dag import Dag, csr, longest, sorted_unique
from .diagnosis.types import Chain, StreamOrder

TOP = 10  # chains listed
MAX_LISTED_EDGES = 50  # stream-order-only edges listed (all are counted)
REACH_BUDGET = 5_000_000  # node visits for the reachability checks of one graph


# Long on purpose: one vectorised pass over the regions; split, it hands a dozen arrays around
def _data_edges(dag: Dag) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                   np.ndarray]:
    """The data DAG's edges (src, dst positions; an edge may repeat), which nodes have no op
    information, which edges stay once fresh outputs are renamed (read-after-write, the
    barriers' edges, and the orderings of in-place writers: module docstring) and which nodes
    write in place.

    Vectorised over regions: the address space cut at every written range's ends, so that
    each write covers a region whole or not at all (a region no write covers orders nothing).
    The writes, one row per (node, region), are sorted by region and visit rank: consecutive
    ones are write-after-write. Each read, one row per covered region it touches, finds its
    place among them by binary search: the write before it (read-after-write) and the one
    after (write-after-read; its own node's, where it writes in place). Barriers likewise
    over the visit order."""
    assert dag.order is not None
    n, order, rank = dag.n, dag.order, dag.rank
    reads, writes = dag.reads, dag.writes
    rc, wc = _counts(reads), _counts(writes)
    hard = (rc < 0) & (wc < 0)
    rc, wc = np.maximum(rc, 0), np.maximum(wc, 0)
    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    raws: list[np.ndarray] = []
    inplace = inplace_by_name(dag.ops)
    nw = int(wc.sum())
    if nw:  # without a write no range orders anything
        wr, wnode = _flat(writes, wc, nw)
        rr, rnode = _flat(reads, rc, int(rc.sum()))
        bounds = sorted_unique(wr.ravel())
        lo = np.searchsorted(bounds, wr[:, 0])
        wseg, wnode = _expand(lo, np.searchsorted(bounds, wr[:, 1]) - lo, wnode)
        covered = np.zeros(len(bounds) + 1, bool)
        covered[wseg] = True
        upto = np.r_[0, np.cumsum(covered)]  # covered regions before each region
        at = np.flatnonzero(covered)
        # a read touches regions [first, end): from the one it starts in (regions begin at
        # a bound) to the last that begins before its end
        first = np.maximum(np.searchsorted(bounds, rr[:, 0], "right") - 1, 0)
        end = np.searchsorted(bounds, rr[:, 1])
        lo = upto[first]
        rseg, rnode = _expand(lo, np.maximum(upto[np.maximum(end, first)] - lo, 0), rnode)
        rseg = at[rseg]
        # writes by region, then visit rank (stable: sorted_unique says why)
        wkey = wseg * n + rank[wnode]
        k = np.argsort(wkey, kind="stable")
        wkey, wseg, wnode = wkey[k], wseg[k], wnode[k]
        rkey = rseg * n + rank[rnode]
        nxt = np.searchsorted(wkey, rkey)  # the first write at or after each read
        has_next = nxt < len(wkey)
        nxt_c = np.minimum(nxt, len(wkey) - 1)
        has_next &= wseg[nxt_c] == rseg
        # a node that reads and writes one region writes in place
        inplace[rnode[has_next & (wkey[nxt_c] == rkey)]] = True
        has_prev = nxt > 0
        prv = np.maximum(nxt - 1, 0)
        has_prev &= wseg[prv] == rseg
        # read-after-write
        srcs.append(wnode[prv[has_prev]])
        dsts.append(rnode[has_prev])
        raws.append(np.ones(int(has_prev.sum()), bool))
        # write-after-write: consecutive writes of a region
        same = wseg[1:] == wseg[:-1]
        srcs.append(wnode[:-1][same])
        dsts.append(wnode[1:][same])
        raws.append(inplace[wnode[1:][same]])
        # write-after-read
        srcs.append(rnode[has_next])
        dsts.append(wnode[nxt_c[has_next]])
        raws.append(inplace[dsts[-1]])
    _barrier_edges(np.asarray(order, np.int64), hard, srcs, dsts, raws)
    if srcs:
        s, d = np.concatenate(srcs), np.concatenate(dsts)
        keep = s != d
        return (s[keep], d[keep], hard, np.concatenate(raws)[keep],  # may repeat an edge
                inplace)
    return np.zeros(0, np.int64), np.zeros(0, np.int64), hard, np.zeros(0, bool), inplace


def _barrier_edges(order: np.ndarray, hard: np.ndarray, srcs: list[np.ndarray],
                   dsts: list[np.ndarray], raws: list[np.ndarray]) -> None:
    """The edges of the nodes without op information (``hard``), each a barrier over the
    visit ``order``: from the barrier before every node, to the barrier after it (added to
    ``srcs``/``dsts``, all kept once renamed)."""
    hv = hard[order]
    if not hv.any():
        return
    n = len(order)
    idx = np.arange(n)
    last_b = np.maximum.accumulate(np.where(hv, idx, -1))
    prev_b = np.r_[-1, last_b[:-1]]
    ok = prev_b >= 0
    srcs.append(order[prev_b[ok]])
    dsts.append(order[ok])
    raws.append(np.ones(int(ok.sum()), bool))
    nxt_b = np.minimum.accumulate(np.where(hv, idx, n)[::-1])[::-1]
    next_b = np.r_[nxt_b[1:], n]
    ok = ~hv & (next_b < n)
    srcs.append(order[ok])
    dsts.append(order[next_b[ok]])
    raws.append(np.ones(int(ok.sum()), bool))


def _flat(ranges: Sequence[Any], counts: np.ndarray, total: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """(the non-empty ranges as an array of [start, end) rows, each one's node position)."""
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(filter(None, ranges))),
                       np.int64, 2 * total).reshape(-1, 2)
    node = np.repeat(np.arange(len(counts)), counts)
    keep = flat[:, 1] > flat[:, 0]
    return flat[keep], node[keep]


def _expand(lo: np.ndarray, cnt: np.ndarray, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One row per (row, region) of rows covering ``cnt`` regions from ``lo``: (region,
    node). Most ranges are one region."""
    if bool((cnt == 1).all()):
        return lo, node
    rep = np.repeat(np.arange(len(lo)), cnt)
    return lo[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)), node[rep]


_INPLACE = re.compile(r"(?:^|::)[A-Za-z0-9_]*[A-Za-z0-9]_(?:\.|$)|\.(?:\w*_)?out\b|::__i\w+__")


def inplace_by_name(ops: Sequence[Optional[str]]) -> np.ndarray:
    """Per node: whether its op writes in place by its name (``aten::add_``,
    ``aten::copy_``, ``aten::mm.out``; not ``aten::_to_copy``)."""
    names = list(dict.fromkeys(ops))
    code = dict(zip(names, range(len(names))))
    hit = np.array([bool(x and _INPLACE.search(x)) for x in names] or [False], bool)
    return hit[np.fromiter(map(code.__getitem__, ops), np.int64, len(ops))].copy() if len(
        ops) else np.zeros(0, bool)


def _counts(ranges: Sequence[Any]) -> np.ndarray:
    """Per node: how many ranges it has (-1: None, not recorded). One list comprehension:
    100,000 nodes twice per graph, in half the time of map and compress."""
    return np.array([-1 if x is None else len(x) for x in ranges], np.int64)


@dataclass(frozen=True)
class WhatIfDag:
    """The what-if DAG and the edges left out of it, as arrays of positions (not part of
    the report: the what-if and the findings read them)."""

    src: np.ndarray
    dst: np.ndarray
    cut_src: np.ndarray
    cut_dst: np.ndarray


def stream_order(dag: Dag, d: list[float], stream: np.ndarray, path_len: float,
                 latency_ns: float) -> tuple[StreamOrder, Optional[WhatIfDag]]:
    """Stream-order-only edges, the chains they cut and the what-if DAG (module docstring).
    ``d``: per node, its duration plus its measured dependency latency (the chains' work);
    ``path_len``: the captured DAG's longest path with those weights; ``latency_ns``: the
    latencies summed."""
    n = dag.n
    assert dag.order is not None
    if all(r is None and w is None for r, w in zip(dag.reads, dag.writes)):
        return StreamOrder(False, n, 0, 0, 0, (), 0, (), None, None), None
    ds, dd, hard, keep, inplace = _data_edges(dag)
    ds, dd = ds[keep], dd[keep]
    a, b = dag.src, dag.dst
    sa, sb = stream[a], stream[b]
    kept = hard[a] | hard[b] | ((sa >= 0) & (sb >= 0) & (sa != sb))
    nn = max(n, 1)
    ekey = b * nn + a  # by target first: the targets' CSR (longest's) needs no sort then
    wkey = sorted_unique(np.concatenate([dd * nn + ds, ekey[kept]]))
    cand = ~kept & ~_member(ekey, wkey)
    if cand.any():
        # the kernels of one op call (the same ranges: a GEMM and its split-K reduction)
        # stay in order: their write-after-write is the op's own, not the allocator's (only
        # the edges that would not be kept otherwise need the test)
        same = np.zeros(len(a), bool)
        same[cand] = _same_op(dag, a[cand], b[cand])
        cand &= ~same
        wkey = sorted_unique(np.concatenate([wkey, ekey[same]]))
    wd, ws = wkey // nn, wkey % nn
    # the stream-order-only edges as arrays: a list of 10,000 tuples sets off the garbage
    # collector, which then walks every young list of the analysis (50 ms)
    fa, fb = a[cand], b[cand]
    false, unchecked = _unreached(n, ws, wd, dag.rank, fa, fb)
    fa, fb = fa[false], fb[false]
    listed = tuple(zip(dag.lids[fa[:MAX_LISTED_EDGES]].tolist(),
                       dag.lids[fb[:MAX_LISTED_EDGES]].tolist()))
    out = StreamOrder(
        True, int(hard.sum()), int(inplace.sum()), len(wkey), len(fa), listed, unchecked,
        _chains(dag, d, stream, fb) if len(fa) else (), latency_ns, path_len)
    return out, WhatIfDag(ws, wd, fa, fb)


def what_if_path(dag: Dag, d: Sequence[float], wdag: WhatIfDag) -> tuple[float, list[int]]:
    """The what-if DAG's longest path (its length and positions) with the weights ``d``: the
    bound on more streams with nothing shared and no limit on streams."""
    assert dag.order is not None
    length, path, _ = longest(dag.order, None, csr(dag.n, wdag.dst, wdag.src), list(d),
                              wdag.src, wdag.dst, slack=False, rank=dag.rank)
    return length, path


def _member(x: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Per element of ``x``: whether it is in ``sorted_keys`` (sorted)."""
    if not len(sorted_keys):
        return np.zeros(len(x), bool)
    at = np.clip(np.searchsorted(sorted_keys, x), 0, len(sorted_keys) - 1)
    return sorted_keys[at] == x


def _same_op(dag: Dag, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per edge a -> b: whether both nodes read and write the same ranges (one op call)."""
    a_l, b_l = a.tolist(), b.tolist()

    def same(col: Sequence[Any]) -> np.ndarray:  # compared in C, edge by edge
        return np.fromiter(map(eq, map(col.__getitem__, a_l), map(col.__getitem__, b_l)),
                           bool, len(a_l))

    return same(dag.writes) & same(dag.reads)


def _unreached(n: int, src: np.ndarray, dst: np.ndarray, rank: np.ndarray, xs: np.ndarray,
               ys: np.ndarray) -> tuple[np.ndarray, int]:
    """Which edges x -> y (of ``xs``, ``ys``; not among the DAG's edges ``src`` -> ``dst``,
    which ``rank`` orders) have a y not reachable from x in that DAG (a mask), and how many
    were left unchecked (the visits ran past REACH_BUDGET)."""
    if len(xs) < REACH_BUDGET and bool((rank[ys] == rank[xs] + 1).all()):
        # usual: each y comes right after its x, where only the edge itself (not in the
        # DAG) could join them; one visit (x) each, within the budget
        return np.ones(len(xs), bool), 0
    succ = csr(n, src, dst)
    rank_l = rank.tolist()
    out = np.zeros(len(xs), bool)
    budget = REACH_BUDGET
    unchecked = 0
    for i, (x, y) in enumerate(zip(xs.tolist(), ys.tolist())):
        if budget <= 0:
            unchecked += 1
            continue
        if rank_l[y] == rank_l[x] + 1:  # nothing between them: only the edge itself, not
            found, budget = False, budget - 1  # there, could join them (one visit: x)
        else:
            found, budget = _reaches(succ, rank_l, x, y, budget)
        if not found and budget > 0:
            out[i] = True
        elif not found:
            unchecked += 1
    return out, unchecked


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


def run_label(mods: list[str]) -> str:
    """A run's modules (in visit order) in a few words: the one module, the module all of them
    are inside ("L.blocks (12 modules)"), or the first and the last ("L.fc1 … (loss), 5
    modules")."""
    if not mods:
        return UNATTRIBUTED
    if len(mods) == 1:
        return mods[0]
    parts = [m.split(".") for m in mods]
    common: list[str] = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        common.append(level[0])
    if len(common) > 1 and not common[0].startswith("("):  # inside a module below the root
        return f"{'.'.join(common)} ({len(mods)} modules)"
    return f"{mods[0]} … {mods[-1]} ({len(mods)} modules)"


def _chains(dag: Dag, d: list[float], stream: np.ndarray, cut: np.ndarray
            ) -> tuple[Chain, ...]:
    """Runs of one stream's nodes (in visit order) between stream-order-only edges (``cut``:
    their targets), largest work first."""
    k = np.lexsort((dag.rank, stream))  # by stream, then visit order
    heads = np.zeros(dag.n, bool)
    heads[cut] = True
    sk = stream[k]
    start = np.r_[True, sk[1:] != sk[:-1]] | heads[k]
    run = np.cumsum(start) - 1
    work = np.bincount(run, weights=np.asarray(d)[k])
    first = np.flatnonzero(start)
    lastpos = np.r_[first[1:], len(k)] - 1
    top = np.lexsort((first, -work))[:TOP]
    rows = []
    modules, lids = dag.modules, dag.lids
    for r in top.tolist():
        members = k[first[r]:lastpos[r] + 1]
        mods = list(dict.fromkeys(map(modules.__getitem__,
                                      members[dag.is_work[members]].tolist())))
        rows.append(Chain(int(lids[members[0]]), int(lids[members[-1]]), len(members),
                          float(work[r]), int(sk[first[r]]), run_label(mods), len(mods)))
    return tuple(rows)

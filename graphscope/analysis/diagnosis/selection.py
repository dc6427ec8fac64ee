"""Which replays a graph's figures come from, and each node's duration over them (the rules:
the package docstring, "Replays")."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Optional

import numpy as np

from ..dag import Dag
from .types import ReplaySelection

COLD_RATIO = 1.05  # a first replay this much longer than the others' median is a cold one


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


def durations(dag: Dag, used: Sequence[int]) -> np.ndarray:
    """Per node: its median duration over the ``used`` replays (of its ``durations_ns``);
    NaN where it has none (not a work node, or not timed in those replays)."""
    n = dag.n
    out = np.full(n, np.nan)
    rows = dag.durations_ns
    work = np.flatnonzero(dag.is_work & np.fromiter(map(bool, rows), bool, n))
    if not len(work) or not used:
        return out
    wrows = [rows[i] for i in work.tolist()]
    lens = np.fromiter(map(len, wrows), np.int64, len(wrows))
    r = int(lens.max())
    cols = np.asarray([x for x in used if x < r], np.int64)
    if not len(cols):
        return out
    if bool((lens == r).all()):  # usual: every work node timed in every replay
        mat = np.fromiter(chain.from_iterable(wrows), np.float64, len(work) * r).reshape(-1, r)
        out[work] = np.median(mat[:, cols], axis=1)
        return out
    for i, row, k in zip(work.tolist(), wrows, lens.tolist()):
        xs = [row[c] for c in cols.tolist() if c < k]
        if xs:
            out[i] = float(statistics.median(xs))
    return out


def kernel_sums(dag: Dag) -> list[float]:
    """Per replay: the graph's work node durations summed."""
    rows = [x for x, w in zip(dag.durations_ns, dag.is_work.tolist()) if w and x]
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

"""The gaps between consecutive replays on the GPU (which pairs count: the package
docstring)."""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ...model.bundle import Bundle
from .graph import GraphWork
from .types import BetweenReplays


def _median(xs: Sequence[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


def between(bundle: Bundle, works: Sequence[GraphWork],
            launches: Mapping[tuple[str, int], tuple[int, int]]) -> Optional[BetweenReplays]:
    """Gaps between consecutive replays used (with events), and each replay's ``tail_ns``
    (filled in ``works``)."""
    iv: list[tuple[int, int, str, int, dict[str, Any]]] = []  # first, last, graph, replay
    iv.extend((m["first_ns"], m["last_ns"], w.g.name, m["replay"], m)
              for w in works for m in w.reps)
    if len(iv) < 2:
        return None
    iv.sort(key=lambda x: (x[0], x[1]))
    # each known replay's place on the clock: its launch where recorded, else its first node
    ref = {k: v[0] for k, v in launches.items()}
    for a, _, gname, r, _ in iv:
        ref.setdefault((gname, r), a)
    kept_keys = {(gname, r) for _, _, gname, r, _ in iv}
    hidden = sorted(v for k, v in ref.items() if k not in kept_keys)  # launched, no events
    known: dict[str, list[int]] = defaultdict(list)
    for (gname, _), v in ref.items():
        known[gname].append(v)
    skip = bundle.manifest.get("skip_replays") or 0
    more = {}
    for g in bundle.graphs:
        total = g.info.get("replays") if isinstance(g.info.get("replays"), int) else None
        more[g.name] = (total if total is not None else bundle.replays) > len(known[g.name])
    first = {k: min(v) for k, v in known.items() if v}
    last = {k: max(v) for k, v in known.items() if v}
    gaps, host = [], []
    for x, y in zip(iv, iv[1:]):
        rx, ry = ref[(x[2], x[3])], ref[(y[2], y[3])]
        if any(more.get(k) and last[k] <= rx for k in last):
            continue  # a replay of k without events or launch record may run in between
        if skip and any(first[k] >= ry for k in first):
            continue  # a skipped replay of k may run in between
        i = bisect_right(hidden, rx)
        if i < len(hidden) and hidden[i] < y[0]:
            continue  # a replay launched in between (without events)
        lau = launches.get((y[2], y[3]))
        # launched while this replay still ran (queued): the GPU went on after y[0] - x[1]
        x[4]["tail_ns"] = (lau[0] if lau and lau[0] >= x[1] else y[0]) - x[1]
        gaps.append(y[0] - x[1])
        if lau:
            host.append(max(0, lau[0] - x[1]))
    if not gaps:
        return None
    # the graphs' median spans, as the diagnosis table shows them (one graph: its span)
    spans = [statistics.median(w.spans) for w in works if w.spans]
    mode = bundle.manifest.get("mode")
    note = ("own_replay_loop" if mode != "run" else None if bundle.manifest.get(
        "traced_back_to_back") else "traced_one_at_a_time")
    spread = 0.0
    if len(gaps) >= 4:
        q = statistics.quantiles(gaps, n=4)
        spread = (q[2] - q[0]) / 2.0
    return BetweenReplays(len(gaps), _median(gaps), float(max(gaps)), float(sum(gaps)),
                          _median(spans), _median(host), note, spread)


def host_finding(btw: Optional[BetweenReplays]) -> Optional[tuple[float, float, float]]:
    """(median gap, median span, the gaps' spread) where the gaps between replays are the
    program's own (a ``run`` bundle traced back to back), for the host finding."""
    if btw is None or btw.note is not None or btw.median_gap_ns is None or not (
            btw.median_span_ns):
        return None
    return btw.median_gap_ns, btw.median_span_ns, btw.gap_spread_ns

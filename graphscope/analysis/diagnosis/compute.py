"""``diagnose(bundle)``: the diagnosis of every graph of a bundle, of the gaps between its
replays, and its ranked findings (the definitions: the package docstring); and its JSON form."""

from __future__ import annotations

import gc
import statistics
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Optional

from ...model.bundle import Bundle
from ..dag import Dag
from ..findings import Basis, findings
from ..occupancy import device_of
from ..replays import bundle_busy, busy_until, event_columns, events_by_graph, launches_of
from .graph import GraphWork, analyse, measure
from .types import (
    BetweenReplays,
    Diagnosis,
    GraphDiagnosis,
    Verdict,
    to_json,
)
from .verdicts import with_findings


def diagnose(bundle: Bundle, per_node: bool = False) -> Diagnosis:
    """The diagnosis of every graph of ``bundle``, of the gaps between its replays, and its
    ranked findings. ``per_node``: each graph's slack per node too (``slack_ns``).

    The cyclic garbage collector is held off while it runs, as the bundle reader does: the
    analysis makes large lists and no cycles, and each collection it set off rescanned every
    node object of a bundle built in memory (a capture's, or one nobody froze): 0.1 s of a
    100,000-node graph's ~1 s."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _diagnose(bundle, per_node)
    finally:
        if was:
            gc.enable()


def _diagnose(bundle: Bundle, per_node: bool) -> Diagnosis:
    dags = [Dag(g) for g in bundle.graphs]
    events = events_by_graph(bundle)
    launches = launches_of(bundle)
    cols = {g.name: event_columns(events.get(g.name, []), dag.exec_ids)
            for g, dag in zip(bundle.graphs, dags)}
    spans = {k: (c[0], c[2], c[3]) for k, c in cols.items()}
    # a view of one graph: its launches queued behind every graph of the bundle it came from
    busy = busy_until(spans) if bundle.parent is None else bundle_busy(bundle.parent)
    works = [measure(bundle, g, dag, events.get(g.name, []), launches, busy, cols[g.name])
             for g, dag in zip(bundle.graphs, dags)]
    btw = between(bundle, works, launches)
    device = device_of(bundle.manifest)
    graphs: list[GraphDiagnosis] = []
    bases: list[Basis] = []
    for w in works:
        o, basis = analyse(bundle, w, device, per_node)
        graphs.append(o)
        if basis is not None:
            bases.append(basis)
    verdicts = []
    if btw is not None and btw.note is None and btw.median_gap_ns is not None and (
            btw.median_span_ns is not None and btw.median_gap_ns > btw.median_span_ns):
        verdicts.append(Verdict("host_bound", from_ns=btw.median_gap_ns,
                                to_ns=btw.median_span_ns))
    found = findings(bases, bundle.manifest, host_finding(btw))
    # the verdicts that claim a gain carry their finding's figure, listed or under the floor
    graphs = [replace(o, verdicts=with_findings(o.verdicts, found)) for o in graphs]
    return Diagnosis(tuple(graphs), btw, bool(getattr(bundle, "launches", ())),
                     with_findings(tuple(verdicts), found), found)


def _median(xs: Sequence[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


def between(bundle: Bundle, works: Sequence[GraphWork],
            launches: Mapping[tuple[str, int], tuple[int, int]]) -> Optional[BetweenReplays]:
    """Gaps between consecutive replays used (with events), and each replay's ``gap_after_ns``
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
    gaps, host, cycles = [], [], []
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
        x[4]["gap_after_ns"] = y[0] - x[1]
        gaps.append(y[0] - x[1])
        cycles.append(y[0] - x[0])
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
                          _median(spans), _median(host), note, spread, _median(cycles))


def host_finding(btw: Optional[BetweenReplays]) -> Optional[BetweenReplays]:
    """The gaps between replays where they are the program's own (a ``run`` bundle traced
    back to back), for the host finding."""
    if btw is None or btw.note is not None or btw.median_gap_ns is None or not (
            btw.median_span_ns):
        return None
    return btw


def diagnose_json(bundle: Bundle, per_node: bool = False) -> dict[str, Any]:
    """:func:`diagnose` as JSON data (what readers of plain dicts take)."""
    out: dict[str, Any] = to_json(diagnose(bundle, per_node), per_node)
    return out

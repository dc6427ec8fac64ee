"""Step 4: matching by kernel sequence, for traces without graph node ids (torch <= 2.11),
and how much of the trace's graph work the annotations matched (:func:`check_match`).

Per graph launch (one correlation id), the launched kernels' (name, grid, block) sequence is
matched in order to the bundle graph whose recorded kernels it hits most; each matched kernel
gets that node's annotation, op, shapes and source. No clocks are aligned: times are never
compared across files.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ..model.graph import NodeKind
from .load import AnnotationTable, fragment
from .model import AnnotateResult, LowMatchError
from .rules import TrackInputs
from .scan import Sequence, TraceScan


def count_known_graphs(scan: TraceScan, table: AnnotationTable, bundle: Any,
                       res: AnnotateResult) -> None:
    """Graphed events of a graph (exec id) the annotations know; and, without a bundle, the
    graph-launched kernels that no graph node id joins and nothing can match by sequence."""
    exec_ids = set((table.keys >> np.uint64(32)).tolist())
    if bundle is not None:
        exec_ids.update(n.exec_node_id >> 32 for n in bundle.work_nodes())
    known = np.array(sorted(exec_ids), dtype=np.uint64)
    res.graphed_known = int(np.isin(scan.key >> np.uint64(32), known).sum()) \
        if len(scan.key) else 0
    if bundle is None and scan.launches and len(scan.ungraphed_corr):
        launches = np.array(sorted(scan.launches), dtype=np.int64)
        res.launched_unmatched = int(np.isin(scan.ungraphed_corr, launches).sum())


def check_match(res: AnnotateResult, min_match: float, trace: str, annotations: str) -> None:
    """Refuse (LowMatchError) when less than ``min_match`` of the trace's graph work matched
    the annotations: a low match is a wrong answer (another run's bundle or pickle, or a
    pickle on a trace without graph node ids). ``min_match`` 0 accepts anything."""
    matched, total = res.match
    if min_match <= 0:
        return
    if not total:
        raise LowMatchError(f"{trace}: no CUDA graph work (no graph node ids, no kernels of a "
                            "cudaGraphLaunch): nothing to annotate (--min-match 0 copies it)")
    if matched >= min_match * total:
        return
    if res.launched_unmatched:
        hint = (f"the trace has no graph node ids (torch <= 2.11) and {annotations} is not a "
                "bundle: pass the run's bundle (-a BUNDLE) to match by kernel sequence")
    else:
        hint = (f"are {annotations} the annotations of this run? (--min-match 0 writes the "
                "trace anyway)")
    raise LowMatchError(f"{trace}: matched {matched} of {total} graph work events "
                        f"({100.0 * matched / total:.1f}%) to {annotations}, below --min-match "
                        f"{min_match:g}: {hint}")


def add_sequence_matches(scan: TraceScan, bundle: Any, table: AnnotationTable,
                         track: TrackInputs, res: AnnotateResult
                         ) -> tuple[dict[int, int], TrackInputs]:
    """Match the launches' kernels to ``bundle``; their fragments and modules are appended to
    ``table``. Returns {matched kernel's ordinal: its fragment's index} and the module track's
    inputs with the matched kernels added after the graphed events."""
    seq_frag: dict[int, int] = {}
    if bundle is None or not scan.seq_events:
        return seq_frag, track
    matched = match_sequences(bundle, {k: v for k, v in scan.seq_events.items()
                                       if k in scan.launches}, res)
    corr_of = {ordinal: c for c, evs in scan.seq_events.items() for _, ordinal, *_ in evs}
    m_of, m_corr, m_ts, m_dur = [], [], [], []
    for ordinal, a in matched.items():
        seq_frag[ordinal] = len(table.fragments)
        table.fragments.append(fragment(a))
        m_of.append(len(table.modules))
        table.modules.append(a.get("module_name"))
        m_corr.append(corr_of[ordinal])
        m_ts.append(scan.seq_times[ordinal][0])
        m_dur.append(scan.seq_times[ordinal][1])
    res.annotated_events += len(matched)
    if m_of:
        track = TrackInputs(
            track.modules, np.concatenate([track.of, np.array(m_of, dtype=np.int32)]),
            np.concatenate([track.corr, np.array(m_corr, dtype=np.int64)]),
            np.concatenate([track.ts, np.array(m_ts)]),
            np.concatenate([track.dur, np.array(m_dur)]))
    return seq_frag, track


def match_sequences(bundle: Any, launches: dict[Any, list[Sequence]],
                     res: AnnotateResult) -> dict[int, dict[str, Any]]:
    """Match each launch's kernels to a bundle graph by (name, grid, block) in order."""
    graphs = []
    order = {int(e["exec_node_id"]): k for k, e in enumerate(
        sorted((e for e in bundle.events if e.get("replay") == 0), key=lambda e: e["start_ns"]))}
    for g in bundle.graphs:
        seqs: dict[tuple[str, tuple, tuple], list[Any]] = defaultdict(list)
        nodes = sorted((n for n in g.nodes if n.type == NodeKind.KERNEL),
                       key=lambda n: (order.get(n.exec_node_id, 1 << 40), n.local_id))
        for n in nodes:
            seqs[(n.demangled or n.kernel or "", tuple(n.grid), tuple(n.block))].append(n)
        graphs.append(seqs)
    out: dict[int, dict[str, Any]] = {}
    for evs in launches.values():
        evs.sort()
        res.sequence_candidates += len(evs)
        best, best_hits = None, -1
        for seqs in graphs:
            hits = sum(1 for ev in evs if (ev[2], ev[3], ev[4]) in seqs)
            if hits > best_hits:
                best, best_hits = seqs, hits
        if best is None:
            continue
        used: dict[tuple[str, tuple, tuple], int] = defaultdict(int)
        for _ts, ordinal, name, grid, block in evs:
            k = (name, grid, block)
            lst = best.get(k)
            if not lst or used[k] >= len(lst):
                continue
            node = lst[used[k]]
            used[k] += 1
            a = {kk: str(vv) for kk, vv in node.annotation.items()}
            a["graphscope match"] = "sequence"
            a["graphscope local id"] = node.local_id
            for kk in ("op", "shapes", "source"):
                v = getattr(node, kk)
                if v:
                    a[kk] = v
            out[ordinal] = a
            res.matched_by_sequence += 1
    return out

"""Per-replay values of each graph of a bundle: span, critical path, GPU work, and GPU work per
module, over every traced replay but a cold first one the diagnosis set aside (its replay
selection: the same rule for the gate's samples as for every figure of the diagnosis). The
span is the diagnosis's (``analysis/diagnosis/``: one graph's span in every traced replay,
else in the replays whose events were kept); the critical path of a replay is the longest path
through the captured DAG (``analysis/dag.py``) weighted by that replay's node durations, where
the diagnosis weights it by the medians."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...model.bundle import Bundle
from ...model.graph import UNATTRIBUTED, CapturedGraph
from ..dag import Dag, longest


@dataclass(frozen=True)
class GraphSamples:
    """One graph's per-replay values (ns); empty where not measured."""

    graph: str
    span_ns: tuple[float, ...] = ()
    critical_path_ns: tuple[float, ...] = ()
    work_ns: tuple[float, ...] = ()
    # module -> its nodes' (and its sub-modules') summed durations per replay
    modules: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    set_aside: tuple[int, ...] = ()  # a cold first replay the diagnosis left out, and so these
    # the graph's figures as its diagnosis gives them (span, work, critical_path: ns), which
    # the comparison prints; the samples give their spread (interval, noise)
    figures: Mapping[str, float] = field(default_factory=dict)


def prefixes(module: str) -> list[str]:
    """``L.a.b`` -> ``L``, ``L.a``, ``L.a.b``; pseudo modules (``(loss)``) stay whole."""
    if module.startswith("(") or module == UNATTRIBUTED:
        return [module]
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _durations(g: CapturedGraph, dag: Dag) -> Optional[np.ndarray]:
    """(nodes x replays) durations of ``g``'s nodes by position: a work node's recorded
    duration in each replay (its median where a replay is missing), 0 for the others (empty,
    event and host nodes take no measured time, as in the diagnosis). None: never timed."""
    work = np.flatnonzero(dag.is_work)
    rows = [dag.durations_ns[i] for i in work.tolist()]
    r = max(map(len, rows), default=0)
    if r == 0:
        return None
    mat = np.zeros((dag.n, r))
    for i, d in zip(work.tolist(), rows):
        if len(d) == r:
            mat[i] = d
        elif d:
            mat[i] = float(np.median(d))
            mat[i, : len(d)] = d
    return mat


def graph_samples(bundle: Bundle, g: CapturedGraph, diag: Mapping[str, Any],
                  depth: Optional[int] = None) -> GraphSamples:
    """``g``'s per-replay values; ``diag``: its diagnosis (``diagnose_graph``), whose replays
    give the spans and the figures; ``depth``: module levels kept (None: all)."""
    dag = Dag(g)
    mat = _durations(g, dag)
    if mat is None:
        return GraphSamples(g.name)
    aside = tuple(int(r) for r in (diag.get("selection") or {}).get("set_aside") or ())
    keep = [r for r in range(mat.shape[1]) if r not in aside]
    if keep:
        mat = mat[:, keep]
    whole = ([float(x) for r, x in enumerate(bundle.replay_span_ns) if x and r not in aside]
             if len(bundle.graphs) == 1 else [])
    spans = whole or [float(m["span_ns"]) for m in diag.get("replays", ())]
    cps: list[float] = []
    if dag.order is not None:
        for r in range(mat.shape[1]):
            length, _, _ = longest(dag.order, None, dag.pred, mat[:, r].tolist(), dag.src,
                                   dag.dst, slack=False, rank=dag.rank)
            cps.append(length)
    work = np.flatnonzero(dag.is_work)
    codes: dict[str, int] = {}
    code = np.fromiter((codes.setdefault(dag.modules[i], len(codes)) for i in work.tolist()),
                       np.int64, len(work))
    sums = np.zeros((len(codes), mat.shape[1]))
    np.add.at(sums, code, mat[work])
    modules: dict[str, np.ndarray] = {}
    for name, row in zip(codes, sums):
        for p in prefixes(name):
            if depth is not None and not p.startswith("(") and p.count(".") > depth:
                break
            modules[p] = modules[p] + row if p in modules else row
    cp = diag.get("critical_path") or {}
    figures = {k: float(v) for k, v in (("span", diag.get("span_ns")),
                                         ("work", diag.get("work_ns")),
                                         ("critical_path", cp.get("length_ns")))
               if isinstance(v, (int, float))}
    return GraphSamples(
        g.name, span_ns=tuple(spans), critical_path_ns=tuple(cps), figures=figures,
        work_ns=tuple(mat[work].sum(axis=0).tolist()),
        modules={m: tuple(v.tolist()) for m, v in modules.items()}, set_aside=aside)

"""Per-module GPU work and kernel-count deltas between two bundles (medians, the detail under
``diff``'s headline), and the diagnosis's figures A → B (the gate itself: ``gate/``). Typed
rows: :class:`ModuleWork` and :class:`DiagnosisDeltas` are sections of ``diff``'s one
document (``gate/comparison.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ..model.bundle import Bundle
from .stats import tree_key
from .summary import module_rows, summarize


@dataclass(frozen=True)
class ModuleRow:
    """A module's GPU work (median per replay, sub-modules included) and kernels in A and B;
    a module on one side only has ``only_in`` ``a`` or ``b`` and no ``delta_pct``."""

    module: str
    level: int
    a_ns: float
    b_ns: float
    delta_ns: float
    delta_pct: Optional[float]
    a_kernels: int
    b_kernels: int
    only_in: Optional[str]


@dataclass(frozen=True)
class WorkTotal:
    """GPU work of every graph of the bundle together (median of the replays' totals)."""

    a_ns: float
    b_ns: float
    delta_ns: float
    delta_pct: float
    a_kernels: int
    b_kernels: int


@dataclass(frozen=True)
class ModuleWork:
    total: WorkTotal
    modules: tuple[ModuleRow, ...]  # tree order, a module new in B under its parent


@dataclass(frozen=True)
class Delta:
    """A figure in A and B and B - A (None where a side has none)."""

    a: Optional[float]
    b: Optional[float]
    delta: Optional[float]


def delta(a: Optional[float], b: Optional[float]) -> Delta:
    return Delta(a, b, None if a is None or b is None else b - a)


@dataclass(frozen=True)
class DiagnosisRow:
    graph: str
    critical_path_ns: Delta
    span_ns: Delta
    idle_pct: Delta
    launch_latency_ns: Delta
    tried_ns: Delta  # capture --try-streams: the span measured over more streams


@dataclass(frozen=True)
class DiagnosisDeltas:
    graphs: tuple[DiagnosisRow, ...]  # graphs in both bundles, A's order
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    between_replays_gap_ns: Delta


@dataclass(frozen=True)
class EagerPair:
    """Both bundles' eager-vs-graph comparisons (``analysis/eager.compare``), where both have an
    eager baseline; ``only``: ``a`` or ``b``, the one side that has one."""

    only: Optional[str] = None
    a: Optional[Mapping[str, Any]] = None
    b: Optional[Mapping[str, Any]] = None


def module_work(a: Bundle, b: Bundle, depth: Optional[int] = None) -> ModuleWork:
    """Every module in either bundle (median GPU work per replay, kernel counts) and the
    total."""
    ra = {r["module"]: r for r in module_rows(a, depth)}
    rb = {r["module"]: r for r in module_rows(b, depth)}
    rows = []
    for m in sorted(set(ra) | set(rb), key=tree_key):  # a module new in B under its parent
        x, y = ra.get(m), rb.get(m)
        a_ns = x["median_ns"] if x else 0.0
        b_ns = y["median_ns"] if y else 0.0
        pct = ((100.0 * (b_ns - a_ns) / a_ns if a_ns else (0.0 if not b_ns else None))
               if x and y else None)  # None for a module on one side only
        rows.append(ModuleRow(
            module=m, level=int((x or y)["level"]),  # type: ignore[index]
            a_ns=a_ns, b_ns=b_ns, delta_ns=b_ns - a_ns, delta_pct=pct,
            a_kernels=x["kernels"] if x else 0, b_kernels=y["kernels"] if y else 0,
            only_in=None if (x and y) else ("a" if x else "b")))
    sa, sb = summarize(a), summarize(b)
    ta, tb = sa["replay_kernel_median_ns"], sb["replay_kernel_median_ns"]
    total = WorkTotal(ta, tb, tb - ta, (100.0 * (tb - ta) / ta) if ta else 0.0,
                      sa["work_nodes"], sb["work_nodes"])
    return ModuleWork(total, tuple(rows))


def diff_rows(a: Bundle, b: Bundle, depth: Optional[int] = None) -> list[dict[str, Any]]:
    """:func:`module_work`'s module rows as plain dicts."""
    return [dataclasses.asdict(r) for r in module_work(a, b, depth).modules]


def diff_summary(a: Bundle, b: Bundle, depth: Optional[int] = None) -> dict[str, Any]:
    """:func:`module_work` as plain data, with the two bundles' paths."""
    return {"a": a.path, "b": b.path, **dataclasses.asdict(module_work(a, b, depth))}


def diagnosis_rows(da: Mapping[str, Any], db: Mapping[str, Any],
                   medians: Optional[Mapping[str, tuple[Delta, Delta]]] = None
                   ) -> DiagnosisDeltas:
    """Critical path, span, idle, launch latency and the span measured over more streams
    (``capture --try-streams``) per graph present in both diagnoses (``da``, ``db``: each
    bundle's ``diagnose`` as JSON), and the median gap between replays, A → B. ``medians``:
    graph -> (critical path, span) to show instead of the diagnosis's (``diff``'s: the medians
    over the gate's replays, so that one figure has one value)."""
    ga = {o["graph"]: o for o in da["graphs"] if "error" not in o}
    gb = {o["graph"]: o for o in db["graphs"] if "error" not in o}
    rows = []
    for name in [g for g in ga if g in gb]:
        x, y = ga[name], gb[name]
        cp, span = (medians or {}).get(name) or (
            delta(x["critical_path"]["length_ns"] if x["timed"] else None,
                  y["critical_path"]["length_ns"] if y["timed"] else None),
            delta(x.get("span_ns"), y.get("span_ns")))
        rows.append(DiagnosisRow(
            graph=name, critical_path_ns=cp, span_ns=span,
            idle_pct=delta(x.get("idle_pct"), y.get("idle_pct")),
            launch_latency_ns=delta(x.get("launch_latency_ns"), y.get("launch_latency_ns")),
            tried_ns=delta((x.get("what_if_measured") or {}).get("span_ns"),
                           (y.get("what_if_measured") or {}).get("span_ns"))))
    btw = [d.get("between_replays") or {} for d in (da, db)]
    return DiagnosisDeltas(tuple(rows), tuple(g for g in ga if g not in gb),
                           tuple(g for g in gb if g not in ga),
                           delta(btw[0].get("median_gap_ns"), btw[1].get("median_gap_ns")))


def diagnosis_deltas(a: Bundle, b: Bundle,
                     diagnoses: Optional[tuple[Mapping[str, Any], Mapping[str, Any]]] = None
                     ) -> dict[str, Any]:
    """:func:`diagnosis_rows` of two bundles, each figure the diagnosis's, as plain data.
    ``diagnoses``: both bundles' ``diagnose`` as JSON, where the caller has them."""
    if diagnoses is None:
        from .diagnosis import diagnose_json

        diagnoses = (diagnose_json(a), diagnose_json(b))
    return dataclasses.asdict(diagnosis_rows(*diagnoses))

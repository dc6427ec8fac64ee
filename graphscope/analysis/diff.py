"""Per-module GPU work and kernel-count deltas between two bundles (medians, the detail under
``diff``'s headline), and the diagnosis's figures A / B (the gate itself: ``gate/``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ..model.bundle import Bundle
from .stats import tree_key
from .summary import module_rows, summarize


def diff_rows(a: Bundle, b: Bundle, depth: Optional[int] = None) -> list[dict[str, Any]]:
    """Rows for every module in either bundle (median time per replay, kernel counts)."""
    ra = {r["module"]: r for r in module_rows(a, depth)}
    rb = {r["module"]: r for r in module_rows(b, depth)}
    order = sorted(set(ra) | set(rb), key=tree_key)  # a module new in B under its parent
    rows = []
    for m in order:
        x, y = ra.get(m), rb.get(m)
        a_ns = x["median_ns"] if x else 0.0
        b_ns = y["median_ns"] if y else 0.0
        rows.append({
            "module": m,
            "level": (x or y)["level"],  # type: ignore[index]
            "a_ns": a_ns,
            "b_ns": b_ns,
            "delta_ns": b_ns - a_ns,
            # None for a module on one side only: no percentage of nothing
            "delta_pct": (100.0 * (b_ns - a_ns) / a_ns if a_ns else (0.0 if not b_ns else None))
            if x and y else None,
            "a_kernels": x["kernels"] if x else 0,
            "b_kernels": y["kernels"] if y else 0,
            "only_in": None if (x and y) else ("a" if x else "b"),
        })
    return rows


def diff_summary(a: Bundle, b: Bundle, depth: Optional[int] = None) -> dict[str, Any]:
    sa, sb = summarize(a), summarize(b)
    ta, tb = sa["replay_kernel_median_ns"], sb["replay_kernel_median_ns"]
    return {
        "a": a.path,
        "b": b.path,
        "total": {"a_ns": ta, "b_ns": tb, "delta_ns": tb - ta,
                  "delta_pct": (100.0 * (tb - ta) / ta) if ta else 0.0,
                  "a_kernels": sa["work_nodes"], "b_kernels": sb["work_nodes"]},
        "modules": diff_rows(a, b, depth),
    }


def diagnosis_deltas(a: Bundle, b: Bundle,
                     diagnoses: Optional[tuple[Mapping[str, Any], Mapping[str, Any]]] = None
                     ) -> dict[str, Any]:
    """Critical path, span, idle, launch latency and the span measured over more streams
    (``capture --try-streams``) per graph present in both bundles (by name), and the median gap
    between replays, as A / B / delta. ``diagnoses``: both bundles' ``diagnose``, where the
    caller has them."""
    if diagnoses is None:
        from .diagnosis import diagnose_json

        diagnoses = (diagnose_json(a), diagnose_json(b))
    da, db = diagnoses
    ga = {o["graph"]: o for o in da["graphs"] if "error" not in o}
    gb = {o["graph"]: o for o in db["graphs"] if "error" not in o}

    def pair(x: Optional[float], y: Optional[float]) -> dict[str, Optional[float]]:
        return {"a": x, "b": y, "delta": None if x is None or y is None else y - x}

    rows = []
    for name in [g for g in ga if g in gb]:
        x, y = ga[name], gb[name]
        rows.append({
            "graph": name,
            "critical_path_ns": pair(x["critical_path"]["length_ns"] if x["timed"] else None,
                                     y["critical_path"]["length_ns"] if y["timed"] else None),
            "span_ns": pair(x.get("span_ns"), y.get("span_ns")),
            "idle_ns": pair(x.get("median", {}).get("idle_ns"),
                            y.get("median", {}).get("idle_ns")),
            "idle_pct": pair(x.get("idle_pct"), y.get("idle_pct")),
            "launch_latency_ns": pair(x.get("launch_latency_ns"), y.get("launch_latency_ns")),
            # capture --try-streams: the span measured over more streams, where either has one
            "tried_ns": pair((x.get("what_if_measured") or {}).get("span_ns"),
                             (y.get("what_if_measured") or {}).get("span_ns")),
        })
    btw = [d.get("between_replays") or {} for d in (da, db)]
    return {"graphs": rows,
            "only_in_a": [g for g in ga if g not in gb],
            "only_in_b": [g for g in gb if g not in ga],
            "between_replays_gap_ns": pair(btw[0].get("median_gap_ns"),
                                           btw[1].get("median_gap_ns"))}

"""Per-module time and kernel-count deltas between two bundles."""

from __future__ import annotations

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


# a GPU-work increase smaller than this is run-to-run noise, whatever its percentage (a 6 µs
# leaf module moves by 0.4 µs between two recordings of one model on the H200); eager.py's
# "slower in the graph" uses the same floor
NOISE_FLOOR_NS = 1_000.0


def is_regression(delta_pct: Optional[float], delta_ns: float, limit_pct: float,
                  floor_ns: float = NOISE_FLOOR_NS) -> bool:
    """Whether a delta breaks a ``limit_pct`` gate: above the limit and above the floor."""
    return delta_pct is not None and delta_pct > limit_pct and delta_ns >= floor_ns


def worst_regression(d: dict[str, Any], floor_ns: float = NOISE_FLOOR_NS
                     ) -> tuple[float, str]:
    """The largest GPU-work increase in % and where: the total (every kernel's time summed
    per replay) or a module present in both; increases under ``floor_ns`` are noise, not
    regressions (a total below it reads as no increase, 0%)."""
    t = d["total"]
    best = (t["delta_pct"] if t["delta_ns"] >= floor_ns else min(t["delta_pct"], 0.0), "total")
    for r in d["modules"]:
        if (r["only_in"] is None and r["delta_pct"] is not None and r["delta_pct"] > best[0]
                and r["delta_ns"] >= floor_ns):
            best = (r["delta_pct"], r["module"])
    return best


def under_floor(d: dict[str, Any], worst: float, floor_ns: float = NOISE_FLOOR_NS
                ) -> Optional[dict[str, Any]]:
    """The module with the largest increase above ``worst`` that ``floor_ns`` left out of
    :func:`worst_regression` as noise (None: none): what a gate's verdict line names beside
    it, so that a larger % in the table is not read as missed."""
    rows = [r for r in d["modules"] if r["only_in"] is None and r["delta_pct"] is not None
            and r["delta_pct"] > worst and 0 < r["delta_ns"] < floor_ns]
    return max(rows, key=lambda r: r["delta_pct"]) if rows else None


def worst_regression_pct(d: dict[str, Any]) -> float:
    """The largest GPU-work increase in %, over the total and every module present in both."""
    return worst_regression(d)[0]


def diagnosis_deltas(a: Bundle, b: Bundle) -> dict[str, Any]:
    """Critical path, span, idle, launch latency and the span measured over more streams
    (``capture --try-streams``) per graph present in both bundles (by name), and the median gap
    between replays, as A / B / delta."""
    from .diagnosis import diagnose

    da, db = diagnose(a), diagnose(b)
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

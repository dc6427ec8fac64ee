"""Per-module time and kernel-count deltas between two bundles."""

from __future__ import annotations

from typing import Any, Optional

from ..model.graph import Bundle
from .summary import module_rows, summarize


def diff_rows(a: Bundle, b: Bundle, depth: Optional[int] = None) -> list[dict[str, Any]]:
    """Rows for every module in either bundle (median time per replay, kernel counts)."""
    ra = {r["module"]: r for r in module_rows(a, depth)}
    rb = {r["module"]: r for r in module_rows(b, depth)}
    order = list(ra) + [m for m in rb if m not in ra]
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
            "delta_pct": (100.0 * (b_ns - a_ns) / a_ns) if a_ns else (100.0 if b_ns else 0.0),
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


def worst_regression_pct(d: dict[str, Any]) -> float:
    """The largest time increase in %, over the total and every module present in both."""
    pcts = [d["total"]["delta_pct"]]
    pcts += [r["delta_pct"] for r in d["modules"] if r["only_in"] is None]
    return max(pcts)

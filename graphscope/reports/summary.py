"""Aggregate a bundle into the module tree, top kernels and per-op rows.

Times are per replay: a module's time in replay r is the sum of its nodes' durations in r
(inclusive of sub-modules); the table shows the median over replays. Summed over the top-level
rows, per-replay times add up exactly to the replay's graph work time.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Optional

from ..graphs.model import UNATTRIBUTED, Bundle, Node


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


def _prefixes(module: str) -> list[str]:
    if module == UNATTRIBUTED or "." not in module:
        return [module]
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def module_rows(bundle: Bundle, depth: Optional[int] = None) -> list[dict[str, Any]]:
    """Rows of the module tree, depth-first; ``depth`` limits rows to that many levels."""
    r = max(bundle.replays, 0)
    per: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"kernels": 0, "fwd": 0, "bwd": 0, "t": [0] * r, "tf": [0] * r, "tb": [0] * r}
    )
    for n in bundle.work_nodes():
        d = n.durations_ns
        bwd = n.phase == "backward"
        for p in _prefixes(n.module):
            row = per[p]
            row["kernels"] += 1
            row["bwd" if bwd else "fwd"] += 1
            for i, x in enumerate(d[:r]):
                row["t"][i] += x
                row["tb" if bwd else "tf"][i] += x
    total = _median([float(x) for x in bundle.replay_kernel_ns])
    rows = []
    for name in sorted(per, key=_tree_key):
        lvl = 0 if name == UNATTRIBUTED else name.count(".")
        if depth is not None and lvl > depth:
            continue
        row = per[name]
        med = _median(row["t"])
        rows.append(
            {
                "module": name,
                "level": lvl,
                "kernels": row["kernels"],
                "fwd_kernels": row["fwd"],
                "bwd_kernels": row["bwd"],
                "median_ns": med,
                "fwd_ns": _median(row["tf"]),
                "bwd_ns": _median(row["tb"]),
                "pct": (100.0 * med / total) if total else 0.0,
                "per_replay_ns": list(row["t"]),
            }
        )
    return rows


def _tree_key(name: str) -> tuple[int, list[str]]:
    # Unattributed and (loss)-style pseudo modules last; otherwise path order.
    return (1 if name.startswith("(") else 0, name.split("."))


def kernel_rows(bundle: Bundle, top: int = 10, key: str = "kernel") -> list[dict[str, Any]]:
    """Top kernels (by short name) or ops (``key="op"``) by median time per replay."""
    r = bundle.replays
    agg: dict[str, dict[str, Any]] = defaultdict(lambda: {"count": 0, "t": [0] * r})
    for n in bundle.work_nodes():
        k = n.short_name if key == "kernel" else (n.op or "(no op recorded)")
        a = agg[k]
        a["count"] += 1
        for i, x in enumerate(n.durations_ns[:r]):
            a["t"][i] += x
    total = _median([float(x) for x in bundle.replay_kernel_ns])
    rows = [
        {
            key: k,
            "count": a["count"],
            "median_ns": _median(a["t"]),
            "pct": (100.0 * _median(a["t"]) / total) if total else 0.0,
        }
        for k, a in agg.items()
    ]
    rows.sort(key=lambda x: (-x["median_ns"], -x["count"], x[key]))
    return rows[:top] if top else rows


def coverage(bundle: Bundle) -> dict[str, Any]:
    """Share of work nodes that carry a module annotation, by phase."""
    out: dict[str, Any] = {}
    for phase in ("forward", "backward"):
        nodes = [n for n in bundle.work_nodes() if _phase_of(n) == phase]
        tagged = [n for n in nodes if n.module != UNATTRIBUTED]
        out[phase] = {
            "nodes": len(nodes),
            "attributed": len(tagged),
            "pct": 100.0 * len(tagged) / len(nodes) if nodes else 100.0,
        }
    return out


def _phase_of(n: Node) -> str:
    if n.annotation:
        return n.phase
    return "backward" if n.graph == "backward" else "unknown"


def summarize(bundle: Bundle, top: int = 10) -> dict[str, Any]:
    """Everything `graphscope report` shows, as plain data (also written to summary.json)."""
    work = list(bundle.work_nodes())
    return {
        "graphs": [
            {"name": g.name, "exec_id": g.exec_id, "nodes": len(g.nodes),
             "work_nodes": sum(1 for n in g.nodes if n.is_work), "edges": len(g.edges)}
            for g in bundle.graphs
        ],
        "replays": bundle.replays,
        "replay_kernel_median_ns": _median([float(x) for x in bundle.replay_kernel_ns]),
        "replay_span_median_ns": _median([float(x) for x in bundle.replay_span_ns]),
        "work_nodes": len(work),
        "annotated_nodes": sum(1 for n in work if n.annotation),
        "coverage": coverage(bundle),
        "modules": [{k: v for k, v in row.items() if k != "per_replay_ns"}
                    for row in module_rows(bundle)],
        "top_kernels": kernel_rows(bundle, top),
        "top_ops": kernel_rows(bundle, top, key="op"),
        "unjoined_records": bundle.unjoined_records,
    }

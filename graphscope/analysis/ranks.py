"""The cross-rank view of a multi-rank bundle: per-module time per rank, skew, collectives."""

from __future__ import annotations

import statistics
from typing import Any

from ..model.bundle import Bundle
from .ddp import ddp_rows, is_collective
from .summary import module_rows


def merge(ranks: list[tuple[int, Bundle]]) -> dict[str, Any]:
    """Per-module median time per rank, skew (max / median over ranks), collective time."""
    per_rank = {r: {row["module"]: row for row in module_rows(b)} for r, b in ranks}
    modules: list[str] = []
    for _, rows in sorted(per_rank.items()):
        modules += [m for m in rows if m not in modules]
    out_rows = []
    for m in modules:
        times = [per_rank[r][m]["median_ns"] if m in per_rank[r] else 0.0 for r, _ in ranks]
        med = statistics.median(times)
        out_rows.append({
            "module": m,
            "level": next(per_rank[r][m]["level"] for r, _ in ranks if m in per_rank[r]),
            "per_rank_ns": times,
            "median_ns": med,
            "max_ns": max(times),
            "skew": (max(times) / med) if med else (0.0 if not max(times) else float("inf")),
            "slowest_rank": times.index(max(times)),
        })
    collectives = []
    for r, b in ranks:
        ns = 0.0
        count = 0
        for n in b.work:
            if is_collective(n):
                count += 1
                ns += n.median_ns or 0.0
        total = statistics.median(b.replay_kernel_ns) if b.replay_kernel_ns else 0.0
        collectives.append({"rank": r, "kernels": count, "median_ns": ns,
                            "pct": 100.0 * ns / total if total else 0.0,
                            "replay_kernel_ns": total})
    totals = [c["replay_kernel_ns"] for c in collectives]
    med_total = statistics.median(totals) if totals else 0.0
    return {
        "world_size": len(ranks),
        "modules": out_rows,
        "collectives": collectives,
        "replay_skew": (max(totals) / med_total) if med_total else 0.0,
        "ddp": [{"rank": r, "buckets": bk} for r, b in ranks if (bk := ddp_rows(b))],
    }

"""Small statistics and orderings shared by the analyses."""

from __future__ import annotations

import statistics


def median(xs: list[float]) -> float:
    """The median, 0.0 for no values."""
    return float(statistics.median(xs)) if xs else 0.0


def tree_key(name: str) -> tuple[int, list[tuple[int, int, str]]]:
    """Module path order: pseudo modules (``(loss)``, unattributed) last; a path's numbered
    parts in number order (``layers.2`` before ``layers.10``)."""
    return (1 if name.startswith("(") else 0,
            [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in name.split(".")])

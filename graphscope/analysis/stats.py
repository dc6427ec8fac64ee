"""Small statistics and orderings shared by the analyses."""

from __future__ import annotations

import statistics
from typing import Optional


def median(xs: list[float]) -> float:
    """The median, 0.0 for no values."""
    return float(statistics.median(xs)) if xs else 0.0


def module_at(module: str, depth: Optional[int]) -> str:
    """``module`` rolled up to ``depth`` levels below the root (``L.layers.3.mlp`` at depth 1:
    ``L.layers``); pseudo modules (``(loss)``) and ``depth`` None leave it as it is."""
    if depth is None or module.startswith("("):
        return module
    return ".".join(module.split(".")[: depth + 1])


def tree_key(name: str) -> tuple[int, list[tuple[int, int, str]]]:
    """Module path order: pseudo modules (``(loss)``, unattributed) last; a path's numbered
    parts in number order (``layers.2`` before ``layers.10``)."""
    return (1 if name.startswith("(") else 0,
            [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in name.split(".")])

"""Small statistics shared by the analyses."""

from __future__ import annotations

import statistics


def median(xs: list[float]) -> float:
    """The median, 0.0 for no values."""
    return float(statistics.median(xs)) if xs else 0.0
